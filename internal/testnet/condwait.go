package testnet

import (
	"context"
	"sync"
)

// waitLocked waits on cond until ok() holds or ctx ends. The caller holds
// mu, cond's lock, and still holds it on return; ok is called with it
// held. A ctx that ends wakes the wait (a broadcast under mu).
func waitLocked(ctx context.Context, mu *sync.Mutex, cond *sync.Cond, ok func() bool) {
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		cond.Broadcast()
		mu.Unlock()
	})
	defer stop()
	for !ok() && ctx.Err() == nil {
		cond.Wait()
	}
}
