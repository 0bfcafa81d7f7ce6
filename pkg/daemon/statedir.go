package daemon

import (
	"github.com/xlbproject/xlb/pkg/config"
	"github.com/xlbproject/xlb/pkg/dataplane"
)

// Capabilities are what this version of the daemon can do that earlier
// ones could not, one word each (`xlb capabilities`). Package scripts ask
// the running binary before choosing `systemctl reload` over a restart.
var Capabilities = []string{capHotUpgrade, capReloadEnvironment}

// capHotUpgrade: SIGUSR2 hands the pinned state and the listeners to the
// binary on disk (DESIGN §6).
const capHotUpgrade = "hot-upgrade"

// MountStateDir makes sure a bpffs is mounted at the parent of the
// config's state_dir (mounting one if not) and creates state_dir; mounted
// reports whether it mounted one. The unit runs it (`xlb mount-bpffs`)
// outside its sandbox before the daemon, so the mount is the host's and
// outlives the service.
func MountStateDir(c *config.Config) (mounted bool, err error) {
	return dataplane.EnsureBPFFS(c.StateDir)
}
