package clientsetup

import (
	_ "embed"
	"strings"
)

// SkillText is the agent-facing instructions: a Claude Code skill (with its
// front matter), and, without the front matter, the AGENTS.md block.
//
//go:embed skill.md
var SkillText string

// skillBody is SkillText without its front matter.
func skillBody() string {
	s := strings.TrimPrefix(SkillText, "---\n")
	if i := strings.Index(s, "\n---\n"); i >= 0 {
		return s[i+len("\n---\n"):]
	}
	return SkillText
}

// The markers around the block setup owns in an AGENTS.md (or GEMINI.md).
const (
	AgentsBegin = "<!-- herdbridge:begin (written by `herdbridge setup`; edits between these markers are replaced) -->"
	AgentsEnd   = "<!-- herdbridge:end -->"
)

// AgentsBlock is the instructions as the AGENTS.md block, markers included.
func AgentsBlock() string { return AgentsBegin + "\n" + skillBody() + AgentsEnd + "\n" }

// mergeAgentsMD puts the instructions block into an AGENTS.md: between its
// markers if they are there, else appended; the rest of the file is kept.
func mergeAgentsMD(old []byte) []byte {
	s := string(old)
	block := AgentsBlock()
	if i := strings.Index(s, AgentsBegin); i >= 0 {
		if j := strings.Index(s[i:], AgentsEnd); j >= 0 {
			end := i + j + len(AgentsEnd)
			if end < len(s) && s[end] == '\n' {
				end++
			}
			return []byte(s[:i] + block + s[end:])
		}
	}
	if s != "" && !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	if s != "" {
		s += "\n"
	}
	return []byte(s + block)
}
