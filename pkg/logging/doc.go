// Package logging builds the daemon's logger (logrus) from the
// --log.level and --log.format flags, named and valued as node_exporter's
// (prometheus/common promslog): level debug, info, warn or error; format
// logfmt or json.
//
// Two rules hold for every format:
//
//   - A record whose message or field value spans several lines (a
//     config.Errors, say: one problem per line) is written as several
//     records, one per line, each with the record's level and its
//     single-line fields (Split). No log line carries a literal "\n".
//   - When standard error is connected to the journal (systemd sets
//     JOURNAL_STREAM to the device and inode of that stream, see
//     systemd.exec(5)), every line starts with its syslog priority, "<3>"
//     for an error, "<4>" for a warning, which journald strips and
//     records as PRIORITY (the unit's SyslogLevelPrefix=, on by default),
//     so `journalctl -u xlb -p warning` finds the warnings. The logfmt
//     timestamp is dropped there: the journal stamps every line itself.
package logging
