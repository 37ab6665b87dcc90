package doccheck

import (
	"regexp"
	"strings"
)

// Command is one simple shell command a document shows (its words, quotes
// removed), at the line it starts on.
type Command struct {
	Line  int
	Words []string
}

// shellInfo are the info strings of fenced blocks whose lines are shell.
var shellInfo = map[string]bool{"sh": true, "bash": true, "shell": true, "zsh": true, "console": true}

// ShellCommands lists the commands a document shows to be typed: every line
// of a shell block (sh, bash, shell, zsh; in a console block only the "$ "
// lines), every "$ " line of any other fenced block, and the lines of an
// indented code block in prose. A line ending in a backslash goes on on the
// next; comments, pipes, "&&", ";" and "$(…)"/"<(…)" split it into simple
// commands, each listed.
func ShellCommands(text string) []Command {
	var out []Command
	lines := Lines(text)
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		t := strings.TrimSpace(l.Text)
		prompt := strings.HasPrefix(t, "$ ")
		switch {
		case l.Fence && shellInfo[l.Info] && (l.Info != "console" || prompt):
		case l.Fence && prompt:
		case !l.Fence && strings.HasPrefix(l.Text, "    ") && t != "" && indentedBlock(lines, i):
		default:
			continue
		}
		start := l.N
		for strings.HasSuffix(t, "\\") && i+1 < len(lines) && lines[i+1].Fence == l.Fence {
			i++
			t = strings.TrimSuffix(t, "\\") + " " + strings.TrimSpace(lines[i].Text)
		}
		t = strings.TrimPrefix(t, "$ ")
		for _, words := range SplitShell(t) {
			out = append(out, Command{Line: start, Words: words})
		}
	}
	return out
}

// indentedBlock says whether prose line i, indented 4 spaces, is a code
// block rather than a list item's continuation: the lines above it up to a
// blank line are all indented too, and the line before that block is blank
// or the document's start, not a list item.
func indentedBlock(lines []Line, i int) bool {
	j := i
	for j > 0 && strings.HasPrefix(lines[j-1].Text, "    ") && !lines[j-1].Fence {
		j--
	}
	if j == 0 {
		return true
	}
	if strings.TrimSpace(lines[j-1].Text) != "" {
		return false
	}
	for k := j - 1; k >= 0; k-- { // the nearest non-blank line above: not a list item
		p := strings.TrimSpace(lines[k].Text)
		if p == "" {
			continue
		}
		return !listItemRe.MatchString(lines[k].Text) && !strings.HasPrefix(lines[k].Text, "   ")
	}
	return true
}

var listItemRe = regexp.MustCompile(`^\s*([-*+]|\d+[.)])\s`)

// InlineCommands lists the commands of a document's prose code spans that
// start with one of the given program names (`make bench`, …).
func InlineCommands(text string, programs ...string) []Command {
	var out []Command
	for _, l := range Lines(text) {
		if l.Fence {
			continue
		}
		for _, span := range codeRe.FindAllString(l.Text, -1) {
			body := strings.TrimSpace(strings.Trim(span, "`"))
			for _, words := range SplitShell(body) {
				for _, p := range programs {
					if len(words) > 0 && words[0] == p {
						out = append(out, Command{Line: l.N, Words: words})
					}
				}
			}
		}
	}
	return out
}

// SplitShell splits one shell line into simple commands: words with quotes
// and backslashes resolved; an unquoted '#' at a word's start ends the line;
// | || & && ; ( ) ` and $( end a command; a redirection (> >> < 2> &>) drops
// itself and its target; leading VAR=value words are dropped.
func SplitShell(line string) [][]string {
	s := &splitter{}
	rs := []rune(line)
	for i := 0; i < len(rs); i++ {
		i = s.step(rs, i)
		if s.comment {
			break
		}
	}
	s.endWord()
	s.endCommand()
	return s.out
}

type splitter struct {
	out      [][]string
	cmd      []string
	word     strings.Builder
	inWord   bool
	quote    rune // ' or " while inside quotes
	redirect bool // the next word is a redirection's target
	comment  bool
}

// step takes the rune at i (and what belongs to it) and returns the index of
// the last rune it used.
func (s *splitter) step(rs []rune, i int) int {
	r := rs[i]
	switch {
	case s.quote != 0:
		if r == s.quote {
			s.quote = 0
		} else if r == '\\' && s.quote == '"' && i+1 < len(rs) {
			i++
			s.word.WriteRune(rs[i])
		} else {
			s.word.WriteRune(r)
		}
	case r == '\'' || r == '"':
		s.quote, s.inWord = r, true
	case r == '\\' && i+1 < len(rs):
		i++
		s.word.WriteRune(rs[i])
		s.inWord = true
	case r == ' ' || r == '\t':
		s.endWord()
	case r == '#' && !s.inWord:
		s.comment = true
	case r == '|' || r == ';' || r == '&' || r == '(' || r == ')' || r == '`' || (r == '$' && i+1 < len(rs) && rs[i+1] == '('):
		if r == '&' && i+1 < len(rs) && rs[i+1] == '>' {
			s.endWord()
			s.redirect = true
			return i + 1
		}
		s.endWord()
		s.endCommand()
	case r == '>' || r == '<':
		if w := s.word.String(); s.inWord && (w == "1" || w == "2") { // 2>file: the fd is not a word
			s.word.Reset()
			s.inWord = false
		}
		s.endWord()
		s.redirect = true
		for i+1 < len(rs) && (rs[i+1] == '>' || rs[i+1] == '&') {
			i++
		}
	default:
		s.word.WriteRune(r)
		s.inWord = true
	}
	return i
}

func (s *splitter) endWord() {
	if !s.inWord {
		return
	}
	w := s.word.String()
	s.word.Reset()
	s.inWord = false
	if s.redirect {
		s.redirect = false
		return
	}
	if len(s.cmd) == 0 && assignRe.MatchString(w) {
		return
	}
	s.cmd = append(s.cmd, w)
}

var assignRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

func (s *splitter) endCommand() {
	if len(s.cmd) > 0 {
		s.out = append(s.out, s.cmd)
	}
	s.cmd = nil
	s.redirect = false
}

// MakeTargets lists the targets a Makefile defines (rules at the start of a
// line; variable assignments and recipe lines are not targets).
func MakeTargets(makefile string) map[string]bool {
	out := map[string]bool{}
	for _, l := range strings.Split(makefile, "\n") {
		if l == "" || l[0] == '\t' || l[0] == '#' || l[0] == ' ' {
			continue
		}
		head, _, ok := strings.Cut(l, ":")
		if !ok || strings.HasPrefix(l[len(head):], ":=") || strings.ContainsAny(head, "=?+$") {
			continue
		}
		for _, t := range strings.Fields(head) {
			if !strings.HasPrefix(t, ".") {
				out[t] = true
			}
		}
	}
	return out
}

// SplitShellScript is every simple command of a shell script, line by line
// (a backslash at a line's end joins the next), as SplitShell splits them.
func SplitShellScript(script string) [][]string {
	var out [][]string
	joined := strings.ReplaceAll(script, "\\\n", " ")
	for _, l := range strings.Split(joined, "\n") {
		out = append(out, SplitShell(strings.TrimSpace(l))...)
	}
	return out
}

// IsShell says whether a fenced block's info string makes its lines shell,
// as ShellCommands reads them (sh, bash, shell, zsh, console).
func IsShell(info string) bool { return shellInfo[info] }
