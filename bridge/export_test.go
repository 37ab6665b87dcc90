package bridge

// ControlBodyOK exposes controlBodyOK to its fuzz target (bridge_test).
var ControlBodyOK = controlBodyOK
