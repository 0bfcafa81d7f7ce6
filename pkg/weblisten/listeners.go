package weblisten

import (
	"errors"
	"fmt"

	"github.com/sirupsen/logrus"

	"github.com/xlbproject/xlb/pkg/config"
)

// Listeners are the web configuration files of XLB's two listeners,
// opened; a nil field is a listener without one.
type Listeners struct {
	Admin, Metrics *File
}

// OpenListeners opens the files c names in admin.web_config_file and
// metrics.web_config_file (Open) and returns them with the warnings the
// daemon logs at startup (Warnings, for each listener). It fails when a
// file is missing or invalid, and when admin.auth and the admin file's
// basic_auth_users are both set: two sources of users, of which one
// would silently lose. Both the daemon's startup and `xlb check` call it.
// log receives later reload errors (nil: logrus.StandardLogger()).
func OpenListeners(c *config.Config, log logrus.FieldLogger) (*Listeners, []string, error) {
	if log == nil {
		log = logrus.StandardLogger()
	}
	admin, errA := Open(c.Admin.WebConfigFile, log.WithField("listener", "admin"))
	if errA != nil {
		errA = fmt.Errorf("admin.web_config_file: %w", errA)
	}
	metrics, errM := Open(c.Metrics.WebConfigFile, log.WithField("listener", "metrics"))
	if errM != nil {
		errM = fmt.Errorf("metrics.web_config_file: %w", errM)
	}
	if err := errors.Join(errA, errM); err != nil {
		return nil, nil, err
	}
	plainAuth := c.Admin.Auth != nil
	if plainAuth && admin.Users() {
		return nil, nil, fmt.Errorf("admin.auth and basic_auth_users in %s (admin.web_config_file) both set users: keep one; "+
			"the web config file's bcrypt hashes replace admin.auth and XLB_ADMIN_PASSWORD", admin.Path())
	}
	var warnings []string
	for _, e := range []Exposure{
		{Name: "admin", Address: c.Admin.Address, Auth: plainAuth || admin.Authenticates(), TLS: admin.TLS(),
			Shows: "reads backend names, addresses and traffic counts and can drain the instance"},
		{Name: "metrics", Address: c.Metrics.Address, Auth: metrics.Authenticates(), TLS: metrics.TLS(),
			Shows: "reads backend names, traffic counts, the version and the interfaces"},
	} {
		warnings = append(warnings, Warnings(e)...)
	}
	return &Listeners{Admin: admin, Metrics: metrics}, warnings, nil
}
