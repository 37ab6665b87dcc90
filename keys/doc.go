// Package keys will own the gateway's Ed25519 host key (OpenSSH format),
// the trust file of host id → public key, and rotation: the primary key
// signs, every listed key verifies. It arrives with the trust work; the
// envelope's signing input it will sign is already fixed in package bridge
// (Envelope.SigningInput, golden vector in testdata/).
package keys
