package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// previewEdits prints, for every file setup would change, a diff of its
// contents now against after setup (- removed, + added, two spaces kept),
// and writes nothing.
func previewEdits(edits []fileEdit, stdout io.Writer) error {
	for _, fe := range edits {
		path := fe.path
		if p, err := filepath.Abs(path); err == nil {
			path = p
		}
		old, err := os.ReadFile(path)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		data, err := fe.edit(old)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if old != nil && string(old) == string(data) {
			fmt.Fprintf(stdout, "unchanged %s\n", path)
			continue
		}
		from := path
		if old == nil {
			from = "/dev/null"
		}
		fmt.Fprintf(stdout, "--- %s\n+++ %s\n", from, path)
		io.WriteString(stdout, lineDiff(string(old), string(data)))
	}
	return nil
}

// lineDiff is a line diff of a against b by their longest common
// subsequence: config files are small, so the quadratic table is cheap.
func lineDiff(a, b string) string {
	x, y := splitLines(a), splitLines(b)
	lcs := make([][]int, len(x)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out strings.Builder
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case i < len(x) && j < len(y) && x[i] == y[j]:
			out.WriteString("  " + x[i] + "\n")
			i, j = i+1, j+1
		case j < len(y) && (i == len(x) || lcs[i][j+1] >= lcs[i+1][j]):
			out.WriteString("+ " + y[j] + "\n")
			j++
		default:
			out.WriteString("- " + x[i] + "\n")
			i++
		}
	}
	return out.String()
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}
