package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/herdbridge/herdbridge/clientsetup"
)

func skillCommand(stdout io.Writer) *cobra.Command {
	c := &cobra.Command{
		Use:   "skill",
		Short: "Print the instructions that tell an agent how to use the bridge_* tools",
		Long: `Print the agent-facing instructions that herdbridge setup installs: when to use each
bridge_* tool and what each status means. It is a Claude Code skill (SKILL.md, with
name/description front matter); --agents-md prints it as the AGENTS.md block instead.`,
		Example: "  herdbridge skill > .claude/skills/herdbridge/SKILL.md\n  herdbridge skill --agents-md >> AGENTS.md",
		Args:    noArgs,
	}
	agentsMD := c.Flags().Bool("agents-md", false, "print the AGENTS.md block (between markers, no front matter)")
	c.RunE = func(*cobra.Command, []string) error {
		if *agentsMD {
			_, err := io.WriteString(stdout, clientsetup.AgentsBlock())
			return err
		}
		_, err := io.WriteString(stdout, clientsetup.SkillText)
		return err
	}
	return c
}

func setupCommand(stdout, stderr io.Writer) *cobra.Command {
	c := &cobra.Command{
		Use:   "setup claude|codex|cursor|gemini|pi [--scope project|user] [--print] [--no-allow]",
		Short: "Connect an MCP client (Claude Code, Codex, Cursor, Gemini CLI, pi) to herdbridge",
		Long: `Write or merge herdbridge's MCP server entry into a client's configuration, and install
the instructions that tell its model how to use the bridge_* tools. Other entries and
keys in the file are kept; the file is replaced atomically.

  claude  project: .mcp.json, .claude/skills/herdbridge/SKILL.md, the allow rule
                   mcp__herdbridge__* in .claude/settings.local.json, and herdbridge in
                   enabledMcpjsonServers of ~/.claude/settings.json (the only place Claude
                   Code takes a .mcp.json server's approval from) (the default scope)
          user:    ~/.claude.json (mcpServers), ~/.claude/skills/herdbridge/SKILL.md and
                   the allow rule in ~/.claude/settings.json
          so claude -p and the TUI call the bridge without a dialog; --no-allow writes
          neither the rule nor the approval
  codex   user:    ~/.codex/config.toml ([mcp_servers.herdbridge] with env_vars, and an
          approval_mode = "approve" table per bridge tool) and ~/.codex/AGENTS.md
          ($CODEX_HOME if set; codex has no project scope)
  cursor  project: .cursor/mcp.json and AGENTS.md (the default scope)
          user:    ~/.cursor/mcp.json
  gemini  user:    ~/.gemini/settings.json (mcpServers.herdbridge, trust) and ~/.gemini/GEMINI.md
          (the default scope); project: .gemini/settings.json and GEMINI.md, which
          Gemini reads only in a folder the person trusted
  pi      project: .pi/mcp.json (pi-mcp-adapter, directTools) and AGENTS.md (the default)
          user:    ~/.pi/agent/mcp.json and ~/.pi/agent/AGENTS.md

--no-allow leaves out what lets the model call the bridge tools without a person
approving each call (Claude Code's rule and approval, Gemini's trust: true).

The entry runs "herdbridge mcp --default-role ROLE": a worker that herdbridge spawns in
the same directory gets its own name and role from its environment, which the defaults
do not override. Inside a herdr pane the name comes from the pane; elsewhere give
--name (written as --default-name) or set HERDBRIDGE_NAME. For claude, gemini and pi
without --name outside herdr, a project gets its directory's name; --scope user needs
--name.

For Codex, setup approves every bridge tool, so codex exec and the TUI call them without
asking, and lists in env_vars the variables Codex must pass to the server: it passes
almost none of its own environment. --print shows the change to each file as a diff
and writes nothing.`,
		Example: `  herdbridge setup claude                    # this repository: .mcp.json + the skill
  herdbridge setup codex --print             # show the change to config.toml as a diff, write nothing
  herdbridge setup cursor --scope user --name me`,
		Args: func(c *cobra.Command, args []string) error {
			if err := cobra.MatchAll(cobra.ExactArgs(1), cobra.OnlyValidArgs)(c, args); err != nil {
				return &usageError{err: fmt.Errorf("setup: %v (use %s)", err, clientsetup.ClientList()), line: c.UseLine(), path: c.CommandPath()}
			}
			return nil
		},
		ValidArgs: clientsetup.Clients,
	}
	fs, dir := newFlags(c)
	scope := fs.String("scope", "", "project or user (default: project for claude and cursor, user for codex)")
	printOnly := fs.Bool("print", false, "print the change to each file as a diff and write nothing")
	noAllow := fs.Bool("no-allow", false, "leave permissions to the person: no allow rule or server approval (claude), no tool approvals (codex), no trust (gemini)")
	name := fs.String("name", "", "default entity name (a spawned worker's $HERDBRIDGE_NAME still wins)")
	role := fs.String("role", "primary", "default role: primary, worker or orchestrator")
	command := fs.String("command", "", "the herdbridge executable the client runs (default: herdbridge if it is on PATH, else this binary)")
	_ = c.RegisterFlagCompletionFunc("role", roleCompletion)
	_ = c.RegisterFlagCompletionFunc("scope", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{"project", "user"}, cobra.ShellCompDirectiveNoFileComp
	})
	c.RunE = func(c *cobra.Command, args []string) error {
		r := clientsetup.Request{Client: args[0], Scope: *scope, NoAllow: *noAllow, Name: *name, Role: *role, Command: *command, Print: *printOnly}
		if c.Flags().Changed("state-dir") || os.Getenv("HERDBRIDGE_STATE_DIR") != "" {
			r.StateDir = *dir
		}
		return clientsetup.Run(r, stdout, stderr)
	}
	return c
}
