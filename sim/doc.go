// Package sim makes the fabric's central promise executable: every
// accepted message ends in exactly one fate its sender can see.
//
// A schedule is a pure function of its seed (a math/rand/v2 PCG source):
// a list of rounds, each one to three actions run concurrently on several
// gateways sharing one memnet.Network — sends, broadcasts, asks and
// answers, polls (some abandoned: their handover settled not delivered;
// some stalled and settled later), and faults: stop, reap, remove,
// restart, kill -9, disk full, broker cut and pane faults. Rounds run one
// after another, so a failing seed mostly reproduces; only the actions of
// one round interleave freely.
//
// Every body carries a unique tag, so the accounting is exact, never by
// timing. After the last round a quiescence phase heals every fault,
// restarts what is down, settles stalled readers, drains every inbox and
// waits (with a deadline) for receipts; then Check looks at every accepted
// msgId: delivered to its recipient, or reported to its sender (a notice
// with corr = msgId, or the call's own failed status) — exactly one of the
// two — no brief typed twice, and duplicates counted apart.
//
// It uses only the exported API of bridge, memnet, store and keys, plus a
// controllable clock (bridge.Config.Now) for reaping and, where the process
// may mount one, a tmpfs per gateway for disk full (DiskFaults).
package sim
