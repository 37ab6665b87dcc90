package benchreport

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// ParseNotes reads the engineers' notes (bench/notes.md): a "## <target
// ID>" heading, then what a profile says about that figure, until the next
// heading. Text before the first heading is the file's own preamble and is
// dropped. The report prints a missed row's note under the table, so the
// explanation lives in the repository, next to the code it is about.
func ParseNotes(r io.Reader) (map[string]string, error) {
	notes := map[string]string{}
	sc := bufio.NewScanner(r)
	id := ""
	var body []string
	flush := func() {
		if id != "" {
			notes[id] = strings.TrimSpace(strings.Join(body, "\n"))
		}
	}
	for sc.Scan() {
		line := sc.Text()
		if h, ok := strings.CutPrefix(line, "## "); ok {
			flush()
			id, body = strings.TrimSpace(h), nil
			continue
		}
		body = append(body, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("benchreport: reading notes: %w", err)
	}
	flush()
	return notes, nil
}
