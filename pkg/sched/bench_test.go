package sched

import (
	"fmt"
	"testing"
)

// BenchmarkMaglevBuild measures one table build at MaglevSize(N) (the
// default sizes: 16381, 65521, 524287) and at the largest size.
func BenchmarkMaglevBuild(b *testing.B) {
	for _, n := range []int{3, 100, 1000} {
		ws := make([]uint16, n)
		for i := range ws {
			ws[i] = uint16(i%7 + 1)
		}
		ms, m := members(ws...), MaglevSize(n)
		b.Run(fmt.Sprintf("N=%d/M=%d", n, m), func(b *testing.B) {
			for b.Loop() {
				if _, err := Build(Maglev, ms, m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	ws := make([]uint16, 1024)
	for i := range ws {
		ws[i] = uint16(i%7 + 1)
	}
	ms := members(ws...)
	b.Run(fmt.Sprintf("N=1024/M=%d", MaxMaglevSize), func(b *testing.B) {
		for b.Loop() {
			if _, err := Build(Maglev, ms, MaxMaglevSize); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkMaglevCollateral reports the collateral of removing each of up
// to 20 members of N (equal weights) at MaglevSize(N): the mean and the
// worst percentage of M that changed owner although its owner stayed.
func BenchmarkMaglevCollateral(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		ws := make([]uint16, n)
		for i := range ws {
			ws[i] = 1
		}
		ms, m := members(ws...), MaglevSize(n)
		b.Run(fmt.Sprintf("N=%d/M=%d", n, m), func(b *testing.B) {
			var sum, worst float64
			var runs int
			for b.Loop() {
				before, err := Build(Maglev, ms, m)
				if err != nil {
					b.Fatal(err)
				}
				for k := range min(n, 20) {
					gone := k * n / min(n, 20)
					rest := append(append([]Member{}, ms[:gone]...), ms[gone+1:]...)
					after, err := Build(Maglev, rest, m)
					if err != nil {
						b.Fatal(err)
					}
					moved := 0
					for s := range before.Entries {
						if was := ms[before.Entries[s]]; was != ms[gone] && was != rest[after.Entries[s]] {
							moved++
						}
					}
					c := 100 * float64(moved) / float64(m)
					sum += c
					worst = max(worst, c)
					runs++
				}
			}
			b.ReportMetric(sum/float64(runs), "collateral-mean-%")
			b.ReportMetric(worst, "collateral-max-%")
		})
	}
}
