// Package keys owns a gateway's Ed25519 host key, the trust file that maps
// host ids to the public keys their envelopes must verify under, and key
// rotation: the current key signs, every listed key verifies.
//
// Everything lives in the gateway state directory:
//
//	host_ed25519       private key, OpenSSH format (what ssh-keygen -t ed25519 writes), mode 0600
//	host_ed25519.pub   "ssh-ed25519 AAAA… herdbridge@<host>"
//	trusted_hosts      one "<host> ssh-ed25519 AAAA… [comment]" per line; a host may have several
//	retired_keys/      previous host keys after Rotate, so this host's in-flight messages still verify,
//	                   and previous HPKE keys after RotateSealKey (kept SealRetention)
//	host_hpke          HPKE private key (ML-KEM-768+X25519) other hosts seal bodies to, PEM, mode 0600
//	host_hpke.pub      "hpke-mlkem768x25519 BASE64 herdbridge@<host>"
//	seal_peers         the other hosts' HPKE keys from their signed heartbeats, mode 0600
//
// A [Ring] is what a gateway verifies with; it is safe for concurrent use,
// does no file I/O on [Ring.Verify], and follows the trust file with
// [Ring.Watch]. The package does not know the envelope format: what is
// signed is fixed in package bridge (Envelope.SigningInput). It must not
// import bridge.
//
// The trust file is filled by hand (`herdbridge keys trust`) or by
// package keys/pairing (`herdbridge pair`), which pins a peer's key with
// [Trust] once a one-time code has authenticated it.
package keys
