package clientsetup

import (
	"os"
	"path/filepath"
)

// geminiTrustNote is what setup cannot do for a Gemini CLI project: Gemini
// ignores a folder's .gemini/settings.json (and so its MCP servers) until
// the person trusts the folder, and a headless run in an untrusted folder
// exits. GEMINI_CLI_TRUST_WORKSPACE=true trusts it for one session, servers
// included; --skip-trust starts the run but loads no project server
// (measured with 0.61.0).
const geminiTrustNote = "Gemini CLI reads .gemini/settings.json only in a trusted folder: trust it when gemini asks (or with /permissions), or run with GEMINI_CLI_TRUST_WORKSPACE=true (--skip-trust does not load a project's servers)"

// geminiHeadlessNote: Gemini refuses to run headless in a folder the person
// has not trusted, whatever its MCP servers.
const geminiHeadlessNote = "headless `gemini -p` runs only in a trusted folder: elsewhere pass --skip-trust (or set GEMINI_CLI_TRUST_WORKSPACE=true)"

// geminiTarget is Gemini CLI's settings.json and GEMINI.md, at the user's
// (~/.gemini, or $GEMINI_CLI_HOME/.gemini) or the project's .gemini.
//
// The server is named "herdbridge": Gemini names its tools
// mcp_<server>_<tool> (mcp_herdbridge_bridge_send) and its policy parser
// splits that at the first underscore after "mcp_", so a server name with
// an underscore would break every rule written for it. trust: true is the
// per-server switch that makes Gemini call the tools without confirmation;
// without it a headless run refuses them (the policy's ask_user is deny when
// no one can answer). Gemini passes its own environment to a stdio server
// (it redacts only names that look like secrets), so a spawned worker's
// HERDBRIDGE_NAME and HERDBRIDGE_ROLE reach `herdbridge mcp` as they are.
func geminiTarget(scope, home string) (target, error) {
	trust := map[string]any{"trust": true}
	if scope == "project" {
		return target{config: filepath.Join(".gemini", "settings.json"), agents: "GEMINI.md",
			allowKeys: trust, note: geminiTrustNote}, nil
	}
	if h := os.Getenv("GEMINI_CLI_HOME"); h != "" {
		home = h
	}
	dir := filepath.Join(home, ".gemini")
	return target{config: filepath.Join(dir, "settings.json"), user: true, agents: filepath.Join(dir, "GEMINI.md"),
		allowKeys: trust, note: geminiHeadlessNote}, nil
}
