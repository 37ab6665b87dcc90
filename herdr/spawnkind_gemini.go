package herdr

// geminiWorkerEnv: Gemini CLI asks the person to trust a folder the first
// time it runs there, and until then ignores the folder's
// .gemini/settings.json and connects no MCP server at all, so a worker
// spawned into a fresh checkout would sit on the trust dialog (the pane goes
// blocked) and never see the bridge. GEMINI_CLI_TRUST_WORKSPACE trusts the
// spawn's directory for that session only: the operator chose it (the
// profile's cwd, or a root or repo the profile allows), and nothing is
// written to the person's trustedFolders.json; a profile that sets it itself
// wins. Measured with 0.61.0 in tmux: without it the TUI opens "Do you
// trust the files in this folder?"; with it the project's server connects and
// bridge_roster runs at once, under the worker's own name. The bridge tools run without confirmation by the server entry's
// trust: true (`herdbridge setup gemini`); Gemini passes the pane's
// environment, and so the worker's identity, to `herdbridge mcp`.
var geminiWorkerEnv = map[string]string{"GEMINI_CLI_TRUST_WORKSPACE": "true"}
