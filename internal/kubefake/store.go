package kubefake

import (
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// object is a stored API object: an EndpointSlice or a Service.
type object interface {
	metav1.Object
	runtime.Object
}

// resource is the collection an object belongs to, as its path names it.
type resource string

const (
	endpointSlices resource = "endpointslices"
	services       resource = "services"
)

// event is one change of the store, at the resourceVersion its object
// carries.
type event struct {
	Type   watch.EventType
	Object object
	res    resource
	rv     int64
}

// key names an object: resource, namespace and name.
type key struct {
	res      resource
	ns, name string
}

// store holds the objects, the resourceVersion counter (one for every
// resource, as etcd's) and the history of changes since the last
// compaction. Callers hold Server.mu.
type store struct {
	rv        int64 // the current resourceVersion: the latest change's
	compacted int64 // a watch from a version below it gets 410 Gone
	objects   map[key]object
	history   []event
}

func newStore() store {
	return store{rv: 1, compacted: 1, objects: map[key]object{}}
}

// resourceOf is the collection of o and the TypeMeta it is served with.
func resourceOf(o object) (resource, metav1.TypeMeta, error) {
	switch o.(type) {
	case *discoveryv1.EndpointSlice:
		return endpointSlices, sliceType, nil
	case *corev1.Service:
		return services, serviceType, nil
	}
	return "", metav1.TypeMeta{}, fmt.Errorf("kubefake: cannot store a %T", o)
}

// apply creates or replaces an object and returns its event.
func (st *store) apply(o object) (event, error) {
	res, _, err := resourceOf(o)
	if err != nil {
		return event{}, err
	}
	if o.GetNamespace() == "" || o.GetName() == "" {
		return event{}, fmt.Errorf("kubefake: an object needs a namespace and a name, got %q/%q", o.GetNamespace(), o.GetName())
	}
	k := key{res, o.GetNamespace(), o.GetName()}
	obj := o.DeepCopyObject().(object)
	typ := watch.Added
	if old, ok := st.objects[k]; ok {
		typ = watch.Modified
		obj.SetUID(old.GetUID())
		obj.SetCreationTimestamp(old.GetCreationTimestamp())
		obj.SetGeneration(old.GetGeneration() + 1)
	} else {
		obj.SetUID(types.UID(fmt.Sprintf("kubefake-%s-%s-%s-%d", res, o.GetNamespace(), o.GetName(), st.rv+1)))
		obj.SetCreationTimestamp(metav1.NewTime(time.Now().Truncate(time.Second)))
		obj.SetGeneration(1)
	}
	st.objects[k] = obj
	return st.record(typ, res, obj), nil
}

// remove deletes an object; ok is false when there is none.
func (st *store) remove(res resource, ns, name string) (event, bool) {
	k := key{res, ns, name}
	old, ok := st.objects[k]
	if !ok {
		return event{}, false
	}
	delete(st.objects, k)
	return st.record(watch.Deleted, res, old.DeepCopyObject().(object)), true
}

// record gives obj the next resourceVersion and appends its event.
func (st *store) record(typ watch.EventType, res resource, obj object) event {
	st.rv++
	obj.SetResourceVersion(strconv.FormatInt(st.rv, 10))
	_, tm, _ := resourceOf(obj)
	obj.GetObjectKind().SetGroupVersionKind(tm.GroupVersionKind())
	e := event{Type: typ, Object: obj, res: res, rv: st.rv}
	st.history = append(st.history, e)
	return e
}

// compact forgets the history: a watch from a version below the current
// one gets 410 Gone.
func (st *store) compact() {
	st.compacted = st.rv
	st.history = nil
}

// selects reports whether a request for res in ns with selectors sel
// (labels) and fsel (fields: metadata.name, metadata.namespace) covers o.
func selects(o object, res resource, ns string, sel labels.Selector, fsel fields.Selector, ores resource) bool {
	return ores == res && o.GetNamespace() == ns && sel.Matches(labels.Set(o.GetLabels())) &&
		fsel.Matches(fields.Set{"metadata.name": o.GetName(), "metadata.namespace": o.GetNamespace()})
}

// matching returns copies of the objects of res in ns that sel and fsel
// select, as ADDED events, in name order.
func (st *store) matching(res resource, ns string, sel labels.Selector, fsel fields.Selector) []event {
	var out []event
	for k, o := range st.objects {
		if selects(o, res, ns, sel, fsel, k.res) {
			out = append(out, event{Type: watch.Added, Object: o.DeepCopyObject().(object), res: k.res, rv: st.rv})
		}
	}
	sortEvents(out)
	return out
}

// since returns the events of res in ns that sel and fsel select after
// version rv.
func (st *store) since(rv int64, res resource, ns string, sel labels.Selector, fsel fields.Selector) []event {
	var out []event
	for _, e := range st.history {
		if e.rv > rv && selects(e.Object, res, ns, sel, fsel, e.res) {
			out = append(out, e)
		}
	}
	return out
}

// sliceType and serviceType are the TypeMeta every object served
// carries, as the API server writes it in watch events.
var (
	sliceType   = metav1.TypeMeta{APIVersion: discoveryv1.SchemeGroupVersion.String(), Kind: "EndpointSlice"}
	serviceType = metav1.TypeMeta{APIVersion: corev1.SchemeGroupVersion.String(), Kind: "Service"}
)
