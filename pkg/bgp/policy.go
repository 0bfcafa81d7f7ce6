package bgp

import (
	"context"
	"fmt"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/server"
)

// importPolicy is the name of the global import policy (see
// setImportPolicy).
const importPolicy = "xlb-local-only"

// setImportPolicy keeps only this speaker's own paths in GoBGP's table:
// GoBGP's global import policy applies to every path entering it, the
// locally added ones included, so the policy accepts route type local and
// rejects the rest. Nothing learned from a peer is stored or passed on to
// another peer (an XLB host is never a transit between its routers).
func setImportPolicy(ctx context.Context, srv *server.BgpServer) error {
	err := srv.AddPolicy(ctx, &api.AddPolicyRequest{Policy: &api.Policy{
		Name: importPolicy,
		Statements: []*api.Statement{{
			Name:       importPolicy + "-accept",
			Conditions: &api.Conditions{RouteType: api.Conditions_ROUTE_TYPE_LOCAL},
			Actions:    &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_ACCEPT},
		}},
	}})
	if err == nil {
		err = srv.SetPolicyAssignment(ctx, &api.SetPolicyAssignmentRequest{Assignment: &api.PolicyAssignment{
			Name:          "global",
			Direction:     api.PolicyDirection_POLICY_DIRECTION_IMPORT,
			Policies:      []*api.Policy{{Name: importPolicy}},
			DefaultAction: api.RouteAction_ROUTE_ACTION_REJECT,
		}})
	}
	if err != nil {
		return fmt.Errorf("import policy: %w", err)
	}
	return nil
}
