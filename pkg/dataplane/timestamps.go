package dataplane

import (
	"fmt"

	"github.com/xlbproject/xlb/pkg/status/api"
)

// TimestampState is what the data path last saw of a backend's TCP
// timestamps (bpf/tsopt.h; xlb_backend_ts): whether the backend's last
// SYN-ACK to a client SYN with timestamps carried them. A backend that
// answers without them (net.ipv4.tcp_timestamps=0) does not negotiate
// them, so the SNAT ports its backend-first closes hold are never reused
// for it (issue 36).
type TimestampState uint32

// The states of TimestampState.
const (
	// TimestampsUnknown: no SYN-ACK to a SYN with timestamps seen yet.
	TimestampsUnknown = TimestampState(xlbXlbBackendTsStateXLB_BTS_UNKNOWN)
	// TimestampsYes: the backend's last such SYN-ACK carried timestamps.
	TimestampsYes = TimestampState(xlbXlbBackendTsStateXLB_BTS_YES)
	// TimestampsNo: the backend's last such SYN-ACK carried none.
	TimestampsNo = TimestampState(xlbXlbBackendTsStateXLB_BTS_NO)
)

// Word is the state as the status document and the metrics name it
// (backends[].timestamps).
func (s TimestampState) Word() api.Timestamps {
	switch s {
	case TimestampsYes:
		return api.TimestampsYes
	case TimestampsNo:
		return api.TimestampsNo
	default:
		return api.TimestampsUnknown
	}
}

// String is Word as a string.
func (s TimestampState) String() string { return string(s.Word()) }

// BackendTimestamps reads every backend id's TimestampState, indexed by
// backend id (MaxBackends of them).
func (d *Dataplane) BackendTimestamps() ([]TimestampState, error) {
	raw, _, err := readArray[uint32](d, d.objs.XlbBackendTs, int(MaxBackends))
	if err != nil {
		return nil, fmt.Errorf("dataplane: read the backends' timestamps: %w", err)
	}
	out := make([]TimestampState, len(raw))
	for i, v := range raw {
		out[i] = TimestampState(v)
	}
	return out, nil
}
