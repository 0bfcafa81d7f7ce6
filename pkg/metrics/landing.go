package metrics

import (
	"html/template"
	"net/http"

	"github.com/xlbproject/xlb/pkg/buildinfo"
	"github.com/xlbproject/xlb/pkg/snapshot"
)

// landingTemplate is the page at / (node_exporter style): what this is and
// a link to the metrics. The link is relative so it works behind a proxy
// path prefix.
var landingTemplate = template.Must(template.New("landing").Parse(`<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>XLB metrics</title></head>
<body>
<h1>XLB metrics</h1>
<p>Prometheus metrics of the XLB load balancer{{if .Name}} <b>{{.Name}}</b>{{end}}, version {{.Version}} (revision {{.Revision}}).</p>
<ul><li><a href="metrics">Metrics</a></li></ul>
<p>Status, readiness and the console are on the admin listener.</p>
</body>
</html>
`))

func landingPage(store snapshot.Source) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data := struct{ Name, Version, Revision string }{Version: buildinfo.Version, Revision: buildinfo.Revision}
		if s := store.Load(); s != nil {
			data.Name = s.Name
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = landingTemplate.Execute(w, data)
	})
}
