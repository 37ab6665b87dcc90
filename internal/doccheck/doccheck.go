// Package doccheck reads the project's markdown (README.md, docs/*.md, the
// reports) the way GitHub renders it, so a test can keep what a reader
// follows valid: every relative link and #anchor resolves, and every command
// shown can be handed to the real CLI's parser (cmd/herdbridge does that part,
// since nothing may import cmd). It only reads text; it runs nothing.
package doccheck

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

// Problem is one thing a reader would trip over, at a line of a file.
type Problem struct {
	File string
	Line int
	Msg  string
}

func (p Problem) String() string { return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Msg) }

// Line is one line of a document with where it sits: inside a fenced code
// block (and that block's info string) or in prose.
type Line struct {
	N     int // 1-based
	Text  string
	Fence bool   // inside a fenced block (the fence lines themselves count as prose: they hold no text)
	Info  string // the block's info string ("sh", "json", ""), when Fence
}

// Lines splits a document into lines, marking fenced code blocks (``` or
// ~~~, indented or not, so a fence inside a list item counts too).
func Lines(text string) []Line {
	var out []Line
	var open string // the fence that opened the current block, "" outside one
	var info string
	for i, l := range strings.Split(text, "\n") {
		t := strings.TrimLeft(l, " \t")
		if f := fenceOf(t); f != "" && (open == "" || (strings.HasPrefix(f, open) && strings.TrimSpace(t[len(f):]) == "")) {
			if open == "" {
				open, info = f, ""
				if words := strings.Fields(t[len(f):]); len(words) > 0 {
					info = words[0]
				}
			} else {
				open, info = "", ""
			}
			out = append(out, Line{N: i + 1, Text: l})
			continue
		}
		out = append(out, Line{N: i + 1, Text: l, Fence: open != "", Info: info})
	}
	return out
}

// fenceOf is the run of three or more backticks or tildes a line starts with.
func fenceOf(t string) string {
	for _, c := range []byte{'`', '~'} {
		n := 0
		for n < len(t) && t[n] == c {
			n++
		}
		if n >= 3 {
			return t[:n]
		}
	}
	return ""
}

var (
	headingRe = regexp.MustCompile(`^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$`)
	linkRe    = regexp.MustCompile(`!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	codeRe    = regexp.MustCompile("`+[^`]*`+")
)

// Slug is the anchor GitHub gives a heading: its rendered text in lower case,
// every character but letters, digits, marks, '_', '-' and space dropped, each
// space a '-'. (Repeats get -1, -2, …: see Anchors.)
func Slug(heading string) string {
	h := linkRe.ReplaceAllString(heading, "$1") // a link in a heading renders as its text
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Anchors is every #anchor a document's headings give it, repeats numbered
// as GitHub numbers them.
func Anchors(text string) map[string]bool {
	seen := map[string]int{}
	out := map[string]bool{}
	for _, l := range Lines(text) {
		m := headingRe.FindStringSubmatch(l.Text)
		if l.Fence || m == nil {
			continue
		}
		s := Slug(m[2])
		a := s
		if n := seen[s]; n > 0 {
			a = fmt.Sprintf("%s-%d", s, n)
		}
		seen[s]++
		out[a] = true
	}
	return out
}

// Link is a markdown link or image target, at its line.
type Link struct {
	Line int
	Href string
}

// Links lists the inline links and images of a document's prose (not those
// shown in code blocks or code spans).
func Links(text string) []Link {
	var out []Link
	for _, l := range Lines(text) {
		if l.Fence {
			continue
		}
		prose := codeRe.ReplaceAllString(l.Text, "")
		for _, m := range linkRe.FindAllStringSubmatch(prose, -1) {
			out = append(out, Link{Line: l.N, Href: m[2]})
		}
	}
	return out
}

var schemeRe = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

// CheckLinks checks every relative link of files (paths relative to root):
// its file or directory exists, and an #anchor into a markdown file is one
// of that file's headings. Links with a scheme (https:, mailto:) are not
// followed.
func CheckLinks(root string, files []string) []Problem {
	var out []Problem
	for _, f := range files {
		text, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			out = append(out, Problem{File: f, Msg: err.Error()})
			continue
		}
		for _, l := range Links(string(text)) {
			if msg := checkLink(root, f, string(text), l.Href); msg != "" {
				out = append(out, Problem{File: f, Line: l.Line, Msg: msg})
			}
		}
	}
	return out
}

// checkLink says what is wrong with one link of file (whose text is self),
// or "".
func checkLink(root, file, self, href string) string {
	if href == "" {
		return "empty link target"
	}
	if schemeRe.MatchString(href) || strings.HasPrefix(href, "//") {
		return ""
	}
	path, anchor, _ := strings.Cut(href, "#")
	p, err := url.PathUnescape(path)
	if err != nil {
		return fmt.Sprintf("link %q: %v", href, err)
	}
	target, text := file, self
	if p != "" {
		target = filepath.Join(filepath.Dir(file), p)
		if rel, err := filepath.Rel(root, filepath.Join(root, target)); err != nil || strings.HasPrefix(rel, "..") {
			return fmt.Sprintf("link %q leaves the repository", href)
		}
		st, err := os.Stat(filepath.Join(root, target))
		if err != nil {
			return fmt.Sprintf("link %q: %s does not exist", href, filepath.ToSlash(target))
		}
		if anchor == "" || st.IsDir() || !strings.HasSuffix(target, ".md") {
			return ""
		}
		b, err := os.ReadFile(filepath.Join(root, target))
		if err != nil {
			return fmt.Sprintf("link %q: %v", href, err)
		}
		text = string(b)
	}
	if anchor != "" && !Anchors(text)[anchor] {
		return fmt.Sprintf("link %q: %s has no heading with the anchor #%s", href, filepath.ToSlash(target), anchor)
	}
	return ""
}
