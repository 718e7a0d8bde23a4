package bench

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"math"
	"strconv"
)

// engineColor tells the engines apart in the chart.
var engineColor = map[string]string{
	EngineFramework: "#4e79a7",
	EngineFranzGo:   "#f28e2b",
	EngineStreams:   "#59a14f",
}

// WriteSVG draws rep as two bar charts side by side, one row per case:
// throughput (median records/s, whiskers from min to max) and p99 latency
// (median, whiskers from min to max). Restore cases, whose records/s are
// changelog records and which have no latency, are left out.
func WriteSVG(w io.Writer, rep *Report) error {
	shown := *rep
	shown.Results = nil
	for _, r := range rep.Results {
		if r.RestoreKeys == 0 {
			shown.Results = append(shown.Results, r)
		}
	}
	rep = &shown
	const (
		rowH   = 30
		top    = 70
		label  = 190
		panelW = 340
		gap    = 70
		bottom = 60
	)
	rows := len(rep.Results)
	width := label + 2*panelW + gap + 30
	height := top + rows*rowH + bottom
	var maxRate, maxP99 float64
	for _, r := range rep.Results {
		maxRate = math.Max(maxRate, math.Max(r.RecordsPerSecMax, r.RecordsPerSec))
		maxP99 = math.Max(maxP99, math.Max(r.P99MSMax, r.P99MS))
	}
	rateTicks, rateMax := niceTicks(maxRate)
	p99Ticks, p99Max := niceTicks(maxP99)

	bw := bufio.NewWriter(w)
	p := func(format string, a ...any) { fmt.Fprintf(bw, format, a...) }
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	p(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	title := fmt.Sprintf("eosctl bench: %d records × %d B, %d partitions, on %s", rep.Records, rep.RecordSize, rep.Partitions, rep.Broker)
	if rep.Pipeline == PipelineCount {
		title = fmt.Sprintf("eosctl bench --pipeline count: %d records over %d keys, %d partitions, on %s", rep.Records, rep.Keys, rep.Partitions, rep.Broker)
	}
	if rep.Pipeline == PipelineWindowed {
		title = fmt.Sprintf("eosctl bench --pipeline windowed: %d records over %d keys, %d ms windows, %d partitions, on %s",
			rep.Records, rep.Keys, rep.WindowMS, rep.Partitions, rep.Broker)
	}
	p(`<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", 10, esc(title))
	sub := fmt.Sprintf("median of runs, whiskers min–max; p99 from %d records/s paced input to a read_committed reader", rep.LatencyRate)
	p(`<text x="%d" y="40" fill="#555">%s</text>`+"\n", 10, esc(sub))

	panel := func(x0 int, heading string, ticks []float64, scaleMax float64, val func(Result) (v, lo, hi float64, ok bool), unit func(float64) string) {
		p(`<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", x0, top-12, esc(heading))
		for _, t := range ticks {
			x := float64(x0) + t/scaleMax*panelW
			p(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`+"\n", x, top, x, top+rows*rowH)
			p(`<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%s</text>`+"\n", x, top+rows*rowH+16, esc(unit(t)))
		}
		for i, r := range rep.Results {
			y := top + i*rowH
			v, lo, hi, ok := val(r)
			if !ok {
				reason := "no result"
				switch {
				case r.Skipped != "":
					reason = "skipped"
				case r.Error != "":
					reason = "failed"
				}
				p(`<text x="%d" y="%d" fill="#999">%s</text>`+"\n", x0+4, y+rowH/2+4, reason)
				continue
			}
			color := engineColor[r.Engine]
			if color == "" {
				color = "#888"
			}
			bwid := v / scaleMax * panelW
			p(`<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", x0, y+5, bwid, rowH-10, color)
			if hi > lo {
				xl, xh := float64(x0)+lo/scaleMax*panelW, float64(x0)+hi/scaleMax*panelW
				ym := y + rowH/2
				p(`<path d="M%.1f %dH%.1fM%.1f %dV%dM%.1f %dV%d" stroke="#222" fill="none"/>`+"\n",
					xl, ym, xh, xl, ym-5, ym+5, xh, ym-5, ym+5)
			}
			p(`<text x="%.1f" y="%d" fill="#222">%s</text>`+"\n", float64(x0)+math.Max(bwid, hi/scaleMax*panelW)+4, y+rowH/2+4, esc(unit(v)))
		}
	}
	for i, r := range rep.Results {
		y := top + i*rowH + rowH/2 + 4
		p(`<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", label-10, y, esc(r.Name))
	}
	panel(label, "throughput (records/s)", rateTicks, rateMax, func(r Result) (float64, float64, float64, bool) {
		return r.RecordsPerSec, r.RecordsPerSecMin, r.RecordsPerSecMax, r.Runs > 0
	}, humanCount)
	panel(label+panelW+gap, "p99 end-to-end latency (ms)", p99Ticks, p99Max, func(r Result) (float64, float64, float64, bool) {
		return r.P99MS, r.P99MSMin, r.P99MSMax, r.Runs > 0 && r.LatencySamples > 0
	}, short)

	// Legend.
	lx := label
	for _, e := range []string{EngineFramework, EngineFranzGo, EngineStreams} {
		p(`<rect x="%d" y="%d" width="12" height="12" fill="%s"/>`+"\n", lx, height-24, engineColor[e])
		p(`<text x="%d" y="%d">%s</text>`+"\n", lx+16, height-14, e)
		lx += 130
	}
	p("</svg>\n")
	return bw.Flush()
}

// niceTicks returns gridline values from 0 to a round maximum covering
// max, and that maximum.
func niceTicks(max float64) ([]float64, float64) {
	if max <= 0 || math.IsNaN(max) || math.IsInf(max, 0) {
		return []float64{0, 1}, 1
	}
	raw := max / 4
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var ticks []float64
	t := 0.0
	for ; t < max+step/2; t += step {
		ticks = append(ticks, t)
	}
	top := ticks[len(ticks)-1]
	if top < max {
		top += step
		ticks = append(ticks, top)
	}
	return ticks, top
}

// humanCount prints 1234567 as 1.23M and 45678 as 45.7k.
func humanCount(v float64) string {
	switch {
	case v >= 1e6:
		return short(v/1e6) + "M"
	case v >= 1e3:
		return short(v/1e3) + "k"
	}
	return short(v)
}

// short prints v with about three significant digits.
func short(v float64) string {
	switch {
	case v >= 100 || v == math.Trunc(v):
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

func esc(s string) string { return html.EscapeString(s) }
