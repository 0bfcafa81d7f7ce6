package main

import (
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// plotReference is the peer the plot divides by: the floor when the run
// measured it, else the first reference it measured.
func (t *table) plotReference() string {
	refs := t.refs()
	if len(refs) == 0 {
		return ""
	}
	return refs[0]
}

// writePlot draws, load by load, every peer's median ratio to the plot
// reference as grouped bars, into a PNG at path. It draws nothing (and
// returns false) when the run has no reference.
func writePlot(r *run, path string) (bool, error) {
	t := newTable(r)
	ref := t.plotReference()
	if ref == "" || len(t.loads) == 0 {
		return false, nil
	}
	// Only the loads the reference was measured in.
	var loads []string
	for _, l := range t.loads {
		if _, ok := cellOf(t.by[l][ref]); ok {
			loads = append(loads, l)
		}
	}
	if len(loads) == 0 {
		return false, nil
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Each peer ÷ %s, per load (median of per-repetition ratios)", ref)
	p.Y.Label.Text = "÷ " + ref
	p.Y.Min = 0
	p.Y.Tick.Marker = plot.TickerFunc(ratioTicks)
	var shown []string
	for _, peer := range t.peers {
		if peer != ref {
			shown = append(shown, peer)
		}
	}
	const barWidth = 9
	w := vg.Points(barWidth)
	top := 1.0
	for i, peer := range shown {
		vals := make(plotter.Values, len(loads))
		for j, l := range loads {
			if rs, ok := ratiosOf(t.by[l][peer], t.by[l][ref]); ok {
				vals[j] = rs.median
				top = max(top, rs.median)
			}
		}
		bars, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return false, err
		}
		bars.LineStyle.Width = 0
		bars.Color = plotutil.Color(i)
		bars.Offset = w * vg.Length(float64(i)-float64(len(shown)-1)/2)
		p.Add(bars)
		p.Legend.Add(peer, bars)
	}
	one, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: 1}, {X: float64(len(loads)) - 0.5, Y: 1}})
	if err != nil {
		return false, err
	}
	one.LineStyle.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(one)
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	// Room above the bars for the legend.
	p.Y.Max = top * (1.25 + 0.05*float64(len(shown)))
	p.NominalX(slices.Clone(loads)...)
	// Load names are longer than a group of bars is wide: slanted, they
	// do not run into each other.
	p.X.Tick.Label.Rotation = math.Pi / 6
	p.X.Tick.Label.XAlign = draw.XRight
	p.X.Tick.Label.YAlign = draw.YCenter
	width := vg.Length(max(8, float64(len(loads)*len(shown)*barWidth+len(loads)*30)/72)) * vg.Inch
	if err := p.Save(width, 5*vg.Inch, path); err != nil {
		return false, err
	}
	return true, nil
}

// ratioTicks marks every 0.25, labelled every 0.5.
func ratioTicks(_, max float64) []plot.Tick {
	var ts []plot.Tick
	for i := 0; float64(i)*0.25 <= max; i++ {
		v := float64(i) * 0.25
		t := plot.Tick{Value: v}
		if i%2 == 0 {
			t.Label = fmt.Sprintf("%.1f", v)
		}
		ts = append(ts, t)
	}
	return ts
}
