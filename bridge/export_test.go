package bridge

// ControlBodyOK exposes controlBodyOK to its fuzz target (bridge_test).
var ControlBodyOK = controlBodyOK

// RequestsInMemory is how many published calls the request book keeps in
// memory (requestbound.go).
func (c *Core) RequestsInMemory() int { return c.reqs.inMemory() }
