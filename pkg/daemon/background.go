package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/xlbproject/xlb/pkg/configwatch"
	"github.com/xlbproject/xlb/pkg/maintenance"
)

// startMaintenance starts the maintenance loop (pkg/maintenance) on the
// instance's data path; its samples go to onSample.
func (d *runner) startMaintenance() error {
	interval := d.o.MaintenanceInterval
	loop, err := maintenance.New(d.inst.DP, maintenance.Options{
		OrphanTTL:    d.cfg.OrphanTTL,
		EmbryonicTTL: d.cfg.FlowTable.EmbryonicTTL,
		NextHopGC:    d.inst.NextHopGC,
		Interval:     interval,
		Members:      d.inst.Members,
		OnSample:     d.onSample,
		Log:          d.log.WithField("component", "maintenance"),

		// flow_table.udp_timeout_secs and udp_stream_timeout_secs
		UDPTimeout:       d.cfg.FlowTable.UDPTimeout,
		UDPStreamTimeout: d.cfg.FlowTable.UDPStreamTimeout,

		// the host's reserved ports follow the retired SNAT spaces
		RetiredSNATReleased: d.inst.ReleaseRetiredSNAT,
	})
	if err != nil {
		return err
	}
	d.loop = loop
	ctx, cancel := context.WithCancel(context.Background())
	d.bgCancel = cancel
	d.publishSampleInterval(interval)
	d.bg.Add(1)
	go func() {
		defer d.bg.Done()
		if err := loop.Run(ctx); err != nil && ctx.Err() == nil {
			d.log.WithError(err).Error("maintenance loop stopped")
		}
	}()
	for _, s := range d.inst.Services() {
		d.bg.Add(1)
		go func() {
			defer d.bg.Done()
			d.followBackends(ctx, s.Backends.Changed())
		}()
	}
	return nil
}

// followBackends publishes the backend states whenever a service's
// manager published a new routable set (changed: a health check's
// verdict, a route, a provider change), so status and metrics show it at
// once; the maintenance samples publish them every cycle as well.
func (d *runner) followBackends(ctx context.Context, changed <-chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
			d.publishBackends()
		}
	}
}

// awaitFirstSample waits until the first maintenance sample is published,
// ctx ends, or firstSampleTimeout passes.
func (d *runner) awaitFirstSample(ctx context.Context) error {
	deadline := time.After(firstSampleTimeout)
	for d.store.Load().Sample == nil {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("no maintenance sample within %v", firstSampleTimeout)
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// startConfigWatch reports edits of the config file (DESIGN §1: a change
// never alters the running instance; it is logged and shown in status and
// metrics until reverted).
func (d *runner) startConfigWatch() {
	if d.o.ConfigPath == "" {
		return
	}
	w := configwatch.New(d.o.ConfigPath, d.cfg, d.log.WithField("component", "configwatch"), func(st configwatch.State) {
		d.publishConfig(st)
	})
	ctx, cancel := context.WithCancel(context.Background())
	d.watchCancel = cancel
	go func() {
		if err := w.Run(ctx); err != nil {
			d.log.WithError(err).Warn("config file watch unavailable")
		}
	}()
}

// stopBackground stops the maintenance loop, waits for it and closes its
// close-event reader.
func (d *runner) stopBackground() {
	if d.bgCancel != nil {
		d.bgCancel()
	}
	d.bg.Wait()
	if d.loop != nil {
		if err := d.loop.Close(); err != nil {
			d.log.WithError(err).Warn("close the maintenance loop's close event reader")
		}
		d.loop = nil
	}
}
