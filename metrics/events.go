package metrics

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/herdbridge/herdbridge/bridge"
)

// eventMetrics are fed by the core's Events as they happen.
type eventMetrics struct {
	messages    *prometheus.CounterVec   // hop, kind, outcome
	refusals    *prometheus.CounterVec   // reason
	deadLetters *prometheus.CounterVec   // reason
	unroutable  *prometheus.CounterVec   // kind: notices no inbox took
	inject      *prometheus.HistogramVec // rung
	receipt     *prometheus.HistogramVec // kind of the receipt
	reply       *prometheus.HistogramVec // reply | answer
	delivery    *prometheus.HistogramVec // accept | drain
	pending     *pending
}

// Histogram buckets, in seconds: typing a brief takes from a blink to the
// inject bound (30s); a reply takes an agent's turn, minutes to hours; a
// delivery from a millisecond on one host to hours for a held message.
var (
	injectBuckets   = []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60}
	replyBuckets    = []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400}
	deliveryBuckets = prometheus.ExponentialBuckets(0.001, 4, 12) // 1ms … ~70min
)

func newEventMetrics(pendingCap int) *eventMetrics {
	return &eventMetrics{
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "messages_total",
			Help: "Hops of messages through this gateway, by hop (publish, accept, refuse, hold, drain, queue, inject, expire, deadletter), kind and outcome."},
			[]string{"hop", "kind", "outcome"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "refusals_total",
			Help: "Messages that arrived and were refused, by reason."}, []string{"reason"}),
		deadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "dead_letters_total",
			Help: "Messages consumed from the dead-letter queue, by reason."}, []string{"reason"}),
		unroutable: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "notices_unroutable_total",
			Help: "Notices (INJECTED, FAILED, NO_WAITER, TOO_LATE, ABANDONED, MISSED_ASK) this gateway published that no inbox took, by kind; each is in the dead-letter log."},
			[]string{"kind"}),
		inject: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "inject_duration_seconds",
			Help: "Time to type a brief into a worker's pane, by the receipt rung observed.", Buckets: injectBuckets}, []string{"rung"}),
		receipt: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "receipt_latency_seconds",
			Help: "From publishing a brief to its receipt arriving back here, by receipt kind (INJECTED, FAILED).", Buckets: injectBuckets}, []string{"kind"}),
		reply: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "reply_latency_seconds",
			Help: "From publishing a SEND (ASK) to its first REPLY (ANSWER) arriving back here.", Buckets: replyBuckets}, []string{"kind"}),
		delivery: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "delivery_latency_seconds",
			Help: "From a message's publish (its ts) to its arrival here (accept) or its hand-over to its entity (drain).", Buckets: deliveryBuckets}, []string{"hop"}),
		pending: newPending(pendingCap),
	}
}

func (m *eventMetrics) register(reg *prometheus.Registry) {
	reg.MustRegister(m.messages, m.refusals, m.deadLetters, m.unroutable, m.inject, m.receipt, m.reply, m.delivery)
}

func (m *eventMetrics) observe(e bridge.Event) {
	m.messages.WithLabelValues(hopLabel(e.Hop), kindLabel(e.Kind), outcome(e)).Inc()
	switch e.Hop {
	case bridge.HopPublish:
		m.pending.published(e)
		if strings.HasPrefix(e.Status, bridge.StatusNoticeUnroutable) {
			m.unroutable.WithLabelValues(kindLabel(e.Kind)).Inc()
		}
	case bridge.HopAccept:
		m.accepted(e)
	case bridge.HopDrain:
		if e.Latency > 0 {
			m.delivery.WithLabelValues("drain").Observe(e.Latency.Seconds())
		}
	case bridge.HopRefuse:
		m.refusals.WithLabelValues(refuseReason(e.Status)).Inc()
	case bridge.HopDeadLetter:
		m.deadLetters.WithLabelValues(deadLetterReason(e.Status)).Inc()
	case bridge.HopInject:
		m.inject.WithLabelValues(rungLabel(e.Status)).Observe(e.Latency.Seconds())
	}
}

// accepted measures an arrival: its delivery latency, and the reply
// latency of the send or ask it answers.
func (m *eventMetrics) accepted(e bridge.Event) {
	if e.Latency > 0 {
		m.delivery.WithLabelValues("accept").Observe(e.Latency.Seconds())
	}
	if at, what, ok := m.pending.answered(e); ok {
		h := m.reply
		if what == "receipt" {
			h = m.receipt
		}
		h.WithLabelValues(labelOf(what, e.Kind)).Observe(e.At.Sub(at).Seconds())
	}
}

// labelOf is the histogram label of a matched arrival.
func labelOf(what string, k bridge.Kind) string {
	if what == "receipt" {
		return string(k)
	}
	return what
}

// hops are the core's (bridge/observe.go): a hop added there counts as
// "other" until it is added here.
var hops = map[bridge.Hop]bool{bridge.HopPublish: true, bridge.HopAccept: true, bridge.HopRefuse: true, bridge.HopHold: true,
	bridge.HopDrain: true, bridge.HopQueue: true, bridge.HopInject: true, bridge.HopExpire: true, bridge.HopDeadLetter: true}

func hopLabel(h bridge.Hop) string {
	if hops[h] {
		return string(h)
	}
	return "other"
}

// kindLabel is k, or "other" for a kind outside SPEC §3 (a refused
// message's kind is whatever its sender wrote).
func kindLabel(k bridge.Kind) string {
	switch {
	case k == "":
		return "none"
	case k.Known():
		return string(k)
	}
	return "other"
}

// outcome folds an Event's status into a closed set per hop.
func outcome(e bridge.Event) string {
	switch e.Hop {
	case bridge.HopPublish:
		switch {
		case e.Status == "published":
			return "published"
		case strings.HasPrefix(e.Status, "spooled"):
			return "spooled"
		}
		return "failed"
	case bridge.HopAccept:
		return "accepted"
	case bridge.HopRefuse:
		return "refused"
	case bridge.HopHold:
		return "held"
	case bridge.HopDrain:
		return "drained"
	case bridge.HopQueue:
		return "queued"
	case bridge.HopInject:
		return rungLabel(e.Status)
	case bridge.HopExpire:
		return "expired"
	case bridge.HopDeadLetter:
		return "deadlettered"
	}
	return "other"
}

// rungs are the statuses an inject reports (herdr/inject.go).
var rungs = map[string]bool{bridge.StatusInjected: true, bridge.StatusSubmitted: true, bridge.StatusUncertain: true,
	bridge.StatusFailed: true, bridge.StatusQueued: true}

func rungLabel(s string) string {
	if rungs[s] {
		return s
	}
	return "other"
}

// refuseReasons are the core's refusal reasons (bridge/verify.go).
var refuseReasons = map[string]bool{bridge.RefuseMalformed: true, bridge.RefuseVersion: true, bridge.RefuseOversized: true,
	bridge.RefuseUnknownHost: true, bridge.RefuseBadSignature: true, bridge.RefuseFromNotOnHost: true, bridge.RefuseToMismatch: true,
	bridge.RefuseExpired: true, bridge.RefuseFuture: true, bridge.RefuseReplayed: true, bridge.RefuseNoEntity: true, bridge.RefuseBadKind: true,
	bridge.RefuseRolePolicy: true}

func refuseReason(s string) string {
	if refuseReasons[s] {
		return s
	}
	return "other"
}

// deadLetterReason is the reason's first word (maxlen, expired, rejected,
// delivery_limit): the dead-letter queue's headers are anyone's to write.
func deadLetterReason(s string) string {
	s, _, _ = strings.Cut(s, ":")
	switch s {
	case bridge.ReasonMaxLen, bridge.ReasonExpired, bridge.ReasonRejected, "delivery_limit":
		return s
	}
	return "other"
}
