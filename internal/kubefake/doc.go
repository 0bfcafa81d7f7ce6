// Package kubefake is a fake Kubernetes API server over real HTTP that
// serves discovery.k8s.io/v1 EndpointSlices and core/v1 Services: enough
// of the API for client-go's informers (issue 14: "the wire protocol, with
// a real HTTP server"; issue 30: the Services' weight annotation).
//
// It serves, as JSON and for any namespace:
//
//	GET /apis/discovery.k8s.io/v1/namespaces/NS/endpointslices            list
//	GET /apis/discovery.k8s.io/v1/namespaces/NS/endpointslices?watch=true watch
//	GET /api/v1/namespaces/NS/services                                    list
//	GET /api/v1/namespaces/NS/services?watch=true                         watch
//
// with labelSelector and fieldSelector (metadata.name, metadata.namespace)
// filtering and resourceVersions (one counter for both resources): a list carries the
// current version; a watch from version N replays the changes after N,
// then streams live ones as newline-separated watch events; a watch from
// "" or "0" starts with an ADDED event per object. A watch with
// sendInitialEvents=true (client-go's watch-list, the default of informers
// since v0.35) streams the current objects, then a BOOKMARK annotated
// k8s.io/initial-events-end; Options.NoWatchList refuses it with 422
// Invalid, as a server without the WatchList feature does, and client-go
// falls back to list and watch.
//
// The test drives the objects (Apply, Delete; ApplyService,
// DeleteService) and the failures: a watch
// the server closes (CloseWatches), a change the clients miss through a
// compaction, so that their next watch gets 410 Gone (ApplyMissed), an
// in-stream 410 Expired (ExpireWatches), errors with a given HTTP status (Fail), and the server
// unreachable (Stop, Start). Requests lists what the clients asked.
//
// The server listens where Options.Listen says (default: 127.0.0.1, a
// free port, in the caller's network namespace), so a lab test can run it
// inside the daemon's namespace; WriteKubeconfig writes a kubeconfig file
// that points to it, without authentication.
package kubefake
