// Package kubernetes holds the Kubernetes manifests XLB ships; its test
// checks that they parse and grant what the EndpointSlice provider needs
// and nothing more (issue 14: get, list and watch of EndpointSlices in
// one namespace; issue 30: and of its Services, for the weight
// annotation of the weighted schedulers).
package kubernetes

import (
	"os"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

func TestRBAC(t *testing.T) {
	data, err := os.ReadFile("rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(data), "\n---\n")
	if len(docs) != 3 {
		t.Fatalf("%d documents, want 3 (ServiceAccount, Role, RoleBinding)", len(docs))
	}
	var (
		sa      corev1.ServiceAccount
		role    rbacv1.Role
		binding rbacv1.RoleBinding
	)
	for i, into := range []any{&sa, &role, &binding} {
		// Strict: an unknown or misspelt field is an error, as kubectl's
		// server-side validation would report it.
		if err := yaml.UnmarshalStrict([]byte(docs[i]), into); err != nil {
			t.Fatalf("document %d: %v", i+1, err)
		}
	}
	want := func(what string, got metav1.TypeMeta, apiVersion, kind string) {
		if got.APIVersion != apiVersion || got.Kind != kind {
			t.Errorf("%s is %s %s, want %s %s", what, got.APIVersion, got.Kind, apiVersion, kind)
		}
	}
	want("document 1", sa.TypeMeta, "v1", "ServiceAccount")
	want("document 2", role.TypeMeta, "rbac.authorization.k8s.io/v1", "Role")
	want("document 3", binding.TypeMeta, "rbac.authorization.k8s.io/v1", "RoleBinding")

	ns := sa.Namespace
	if ns == "" || role.Namespace != ns || binding.Namespace != ns {
		t.Errorf("namespaces %q, %q, %q: want one namespace", sa.Namespace, role.Namespace, binding.Namespace)
	}
	wantRules := []rbacv1.PolicyRule{{
		APIGroups: []string{"discovery.k8s.io"},
		Resources: []string{"endpointslices"},
		Verbs:     []string{"get", "list", "watch"},
	}, {
		APIGroups: []string{""},
		Resources: []string{"services"},
		Verbs:     []string{"get", "list", "watch"},
	}}
	if !reflect.DeepEqual(role.Rules, wantRules) {
		t.Errorf("Role rules %+v, want exactly %+v", role.Rules, wantRules)
	}
	if ref := binding.RoleRef; ref != (rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name}) {
		t.Errorf("RoleBinding refers to %+v, want the Role %s", ref, role.Name)
	}
	wantSubjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: ns}}
	if !reflect.DeepEqual(binding.Subjects, wantSubjects) {
		t.Errorf("RoleBinding subjects %+v, want %+v", binding.Subjects, wantSubjects)
	}
}
