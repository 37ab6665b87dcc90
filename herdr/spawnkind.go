package herdr

// kindSpawn adapts a profile to what one agent kind needs to work as a
// spawned worker with no person at the pane: beyond the identity variables
// every worker gets (HERDBRIDGE_NAME, _ROLE, _STATE_DIR, _SPAWN_ID), the
// switches that keep the CLI from stopping on a dialog. It gets a copy of
// the profile (its Env is the profile's own: copy before adding).
type kindSpawn func(Profile) Profile

// spawnKinds are the kinds that need more than the identity variables, by
// herdr agent kind. pi needs nothing more: it has no permission dialogs and
// no folder trust, pi-mcp-adapter calls tools without asking unless the
// person set approveTools, and it passes pi's environment (the identity) to
// `herdbridge mcp`.
var spawnKinds = map[string]kindSpawn{
	"gemini": geminiSpawn,
}

// forKind is p as its kind's row adapts it (p itself for a command profile
// or a kind with no row).
func forKind(p Profile) Profile {
	if f, ok := spawnKinds[p.Kind]; ok && len(p.Command) == 0 {
		return f(p)
	}
	return p
}

// withEnv is p with k=v in its Env, unless the profile sets k itself (the
// operator's word wins over a row's default).
func withEnv(p Profile, k, v string) Profile {
	if _, set := p.Env[k]; set {
		return p
	}
	env := make(map[string]string, len(p.Env)+1)
	for ek, ev := range p.Env {
		env[ek] = ev
	}
	env[k] = v
	p.Env = env
	return p
}
