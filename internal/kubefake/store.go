package kubefake

import (
	"fmt"
	"strconv"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// event is one change of the store, at the resourceVersion its object
// carries.
type event struct {
	Type   watch.EventType
	Object *discoveryv1.EndpointSlice
	rv     int64
}

// key names an object: namespace and name.
type key struct{ ns, name string }

// store holds the objects, the resourceVersion counter and the history of
// changes since the last compaction. Callers hold Server.mu.
type store struct {
	rv        int64 // the current resourceVersion: the latest change's
	compacted int64 // a watch from a version below it gets 410 Gone
	objects   map[key]*discoveryv1.EndpointSlice
	history   []event
}

func newStore() store {
	return store{rv: 1, compacted: 1, objects: map[key]*discoveryv1.EndpointSlice{}}
}

// apply creates or replaces an object and returns its event.
func (st *store) apply(s *discoveryv1.EndpointSlice) (event, error) {
	if s.Namespace == "" || s.Name == "" {
		return event{}, fmt.Errorf("kubefake: an EndpointSlice needs a namespace and a name, got %q/%q", s.Namespace, s.Name)
	}
	k := key{s.Namespace, s.Name}
	obj := s.DeepCopy()
	typ := watch.Added
	if old, ok := st.objects[k]; ok {
		typ = watch.Modified
		obj.UID, obj.CreationTimestamp, obj.Generation = old.UID, old.CreationTimestamp, old.Generation+1
	} else {
		obj.UID = types.UID(fmt.Sprintf("kubefake-%s-%s-%d", s.Namespace, s.Name, st.rv+1))
		obj.CreationTimestamp = metav1.NewTime(time.Now().Truncate(time.Second))
		obj.Generation = 1
	}
	st.objects[k] = obj
	return st.record(typ, obj), nil
}

// remove deletes an object; ok is false when there is none.
func (st *store) remove(ns, name string) (event, bool) {
	k := key{ns, name}
	old, ok := st.objects[k]
	if !ok {
		return event{}, false
	}
	delete(st.objects, k)
	return st.record(watch.Deleted, old.DeepCopy()), true
}

// record gives obj the next resourceVersion and appends its event.
func (st *store) record(typ watch.EventType, obj *discoveryv1.EndpointSlice) event {
	st.rv++
	obj.ResourceVersion = strconv.FormatInt(st.rv, 10)
	obj.TypeMeta = sliceType
	e := event{Type: typ, Object: obj, rv: st.rv}
	st.history = append(st.history, e)
	return e
}

// compact forgets the history: a watch from a version below the current
// one gets 410 Gone.
func (st *store) compact() {
	st.compacted = st.rv
	st.history = nil
}

// matching returns copies of the objects of ns that sel selects, as
// ADDED events, in name order.
func (st *store) matching(ns string, sel labels.Selector) []event {
	var out []event
	for k, o := range st.objects {
		if k.ns == ns && sel.Matches(labels.Set(o.Labels)) {
			out = append(out, event{Type: watch.Added, Object: o.DeepCopy(), rv: st.rv})
		}
	}
	sortEvents(out)
	return out
}

// since returns the events of ns that sel selects after version rv.
func (st *store) since(rv int64, ns string, sel labels.Selector) []event {
	var out []event
	for _, e := range st.history {
		if e.rv > rv && e.Object.Namespace == ns && sel.Matches(labels.Set(e.Object.Labels)) {
			out = append(out, e)
		}
	}
	return out
}

// sliceType is the TypeMeta every object served carries, as the API
// server writes it in watch events.
var sliceType = metav1.TypeMeta{APIVersion: discoveryv1.SchemeGroupVersion.String(), Kind: "EndpointSlice"}
