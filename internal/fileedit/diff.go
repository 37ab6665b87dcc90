package fileedit

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Diff is Update that writes nothing: it prints the change edit makes to
// path as a unified diff ("unchanged path" when there is none).
func Diff(path string, edit Edit, stdout io.Writer) error {
	if p, err := filepath.EvalSymlinks(path); err == nil {
		path = p
	}
	if p, err := filepath.Abs(path); err == nil {
		path = p
	}
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	from := path
	if err != nil {
		from = "/dev/null"
	}
	data, err := edit(old)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if string(old) == string(data) && from != "/dev/null" {
		fmt.Fprintf(stdout, "unchanged %s\n", path)
		return nil
	}
	fmt.Fprintf(stdout, "--- %s\n+++ %s\n%s", from, path, UnifiedDiff(string(old), string(data), 3))
	return nil
}

// maxDiffCells bounds the LCS table of the lines that differ (a config
// file's change is a few dozen lines): past it the whole middle is shown
// as removed and added, which is still a correct diff.
const maxDiffCells = 1 << 22

// UnifiedDiff is the hunks (with ctx lines of context) that turn a into b.
func UnifiedDiff(a, b string, ctx int) string {
	x, y := splitLines(a), splitLines(b)
	ops := diffOps(x, y)
	var out strings.Builder
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		start := max(i-ctx, 0)
		end := i
		for end < len(ops) { // extend while changes are within 2*ctx of each other
			if ops[end].kind != ' ' {
				end++
				continue
			}
			run := end
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}
			if run == len(ops) || run-end > 2*ctx {
				end = min(end+ctx, len(ops))
				break
			}
			end = run
		}
		writeHunk(&out, ops[start:end])
		i = end
	}
	return out.String()
}

type diffOp struct {
	kind       byte // ' ', '-', '+'
	line       string
	aLine, bLn int // 1-based line numbers in a and b this op is at
}

func writeHunk(out *strings.Builder, ops []diffOp) {
	var na, nb int
	for _, o := range ops {
		if o.kind != '+' {
			na++
		}
		if o.kind != '-' {
			nb++
		}
	}
	aStart, bStart := ops[0].aLine, ops[0].bLn
	if na == 0 {
		aStart--
	}
	if nb == 0 {
		bStart--
	}
	fmt.Fprintf(out, "@@ -%d,%d +%d,%d @@\n", aStart, na, bStart, nb)
	for _, o := range ops {
		out.WriteByte(o.kind)
		out.WriteString(o.line)
		if !strings.HasSuffix(o.line, "\n") {
			out.WriteString("\n\\ No newline at end of file\n")
		}
	}
}

// splitLines is s's lines, each with its newline (the last may have none).
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	ls := strings.SplitAfter(s, "\n")
	if ls[len(ls)-1] == "" {
		ls = ls[:len(ls)-1]
	}
	return ls
}

// diffOps is the edit script from x to y: common prefix and suffix as
// they are, the middle by longest common subsequence.
func diffOps(x, y []string) []diffOp {
	p := 0
	for p < len(x) && p < len(y) && x[p] == y[p] {
		p++
	}
	s := 0
	for s < len(x)-p && s < len(y)-p && x[len(x)-1-s] == y[len(y)-1-s] {
		s++
	}
	var ops []diffOp
	ai, bi := 1, 1
	emit := func(k byte, l string) {
		ops = append(ops, diffOp{kind: k, line: l, aLine: ai, bLn: bi})
		if k != '+' {
			ai++
		}
		if k != '-' {
			bi++
		}
	}
	for _, l := range x[:p] {
		emit(' ', l)
	}
	mx, my := x[p:len(x)-s], y[p:len(y)-s]
	for _, o := range lcsOps(mx, my) {
		emit(o.kind, o.line)
	}
	for _, l := range x[len(x)-s:] {
		emit(' ', l)
	}
	return ops
}

// lcsOps diffs two short line lists by a longest-common-subsequence table.
func lcsOps(x, y []string) []diffOp {
	var ops []diffOp
	if len(x)*len(y) > maxDiffCells {
		for _, l := range x {
			ops = append(ops, diffOp{kind: '-', line: l})
		}
		for _, l := range y {
			ops = append(ops, diffOp{kind: '+', line: l})
		}
		return ops
	}
	w := len(y) + 1
	t := make([]int32, (len(x)+1)*w) // t[i*w+j]: LCS of x[i:] and y[j:]
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				t[i*w+j] = t[(i+1)*w+j+1] + 1
			} else {
				t[i*w+j] = max(t[(i+1)*w+j], t[i*w+j+1])
			}
		}
	}
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case i < len(x) && j < len(y) && x[i] == y[j]:
			ops = append(ops, diffOp{kind: ' ', line: x[i]})
			i, j = i+1, j+1
		case i < len(x) && (j == len(y) || t[(i+1)*w+j] >= t[i*w+j+1]):
			ops = append(ops, diffOp{kind: '-', line: x[i]}) // removals before additions, as diff -u
			i++
		default:
			ops = append(ops, diffOp{kind: '+', line: y[j]})
			j++
		}
	}
	return ops
}
