package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Output formats accepted by -o/--output.
const (
	outputTable = "table"
	outputJSON  = "json"
)

// durationFlagHelp ends the help of every duration flag, since Go's
// duration syntax is not obvious to operators.
const durationFlagHelp = " (Go duration, e.g. 30s, 15m, 2h)"

// table is the human rendering of a command's result: a header and rows of
// cells, aligned in columns when printed. Commands build it next to the JSON
// value so both formats show the same data.
type table struct {
	header []string
	rows   [][]string
}

// newTable starts a table with the given column names.
func newTable(header ...string) *table { return &table{header: header} }

// add appends one row; each cell is formatted with %v so callers can pass
// numbers and strings alike.
func (t *table) add(cells ...any) {
	row := make([]string, len(cells))
	for i, c := range cells {
		row[i] = fmt.Sprint(c)
	}
	t.rows = append(t.rows, row)
}

// write prints the table with two spaces between columns. An empty table
// still prints its header so scripts reading the first line see the columns.
func (t *table) write(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(t.header, "\t"))
	for _, r := range t.rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// render prints v as indented JSON with -o json, or t as a table otherwise.
// Every command goes through here so the two formats stay consistent.
func (g *globals) render(w io.Writer, v any, t *table) error {
	if g.output == outputJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	return t.write(w)
}

// millis converts a Kafka millisecond timestamp to a time; non-positive
// values mean "unknown" and give the zero time.
func millis(ms int64) time.Time {
	if ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// fmtTime prints a timestamp for tables, or "-" when it is unknown.
func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// fmtAge prints a duration rounded for humans, or "-" when unknown (negative).
func fmtAge(d time.Duration) string {
	switch {
	case d < 0:
		return "-"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	default:
		return d.Round(time.Second).String()
	}
}

// ageSince is how long ago t was, or -1 when t is unknown.
func ageSince(now, t time.Time) time.Duration {
	if t.IsZero() {
		return -1
	}
	return now.Sub(t)
}
