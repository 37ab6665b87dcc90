package benchreport

import "fmt"

// A Goal is what a target holds a figure to.
type Goal struct {
	Kind  GoalKind
	Limit float64
	Unit  string // of Limit, for the absolute kinds
}

// GoalKind says how a figure is judged.
type GoalKind int

const (
	// Info rows give context (another baseline, the unsigned path): no verdict.
	Info GoalKind = iota
	RatioAtMost
	RatioAtLeast
	AtMost     // the figure itself, in its unit
	Below      // the figure itself, strictly
	OverAtMost // figure − baseline, in the figure's unit
)

func (g Goal) String() string {
	switch g.Kind {
	case RatioAtMost:
		return "≤ " + ratioText(g.Limit)
	case RatioAtLeast:
		return "≥ " + ratioText(g.Limit)
	case AtMost:
		return "≤ " + withUnit(g.Limit, g.Unit)
	case Below:
		return "< " + withUnit(g.Limit, g.Unit)
	case OverAtMost:
		return "≤ +" + withUnit(g.Limit, g.Unit) + " over the baseline"
	}
	return "—"
}

// needsRatio: the goal is a ratio, so it cannot be judged without a
// non-zero baseline.
func (g Goal) needsRatio() bool { return g.Kind == RatioAtMost || g.Kind == RatioAtLeast }

// needsBaseline: the goal cannot be judged without a baseline.
func (g Goal) needsBaseline() bool { return g.needsRatio() || g.Kind == OverAtMost }

// met judges the figure v against baseline b (ratio r = v/b when b ≠ 0).
func (g Goal) met(v, b, r float64) bool {
	switch g.Kind {
	case RatioAtMost:
		return r <= g.Limit
	case RatioAtLeast:
		return r >= g.Limit
	case AtMost:
		return v <= g.Limit
	case Below:
		return v < g.Limit
	case OverAtMost:
		return v-b <= g.Limit
	}
	return false
}

func ratioText(r float64) string { return fmt.Sprintf("%.2f×", r) }

func withUnit(v float64, unit string) string {
	if unit == "" {
		return num(v)
	}
	return num(v) + " " + unit
}

// num prints a figure with as many digits as a reader needs.
func num(v float64) string {
	a := v
	if a < 0 {
		a = -a
	}
	switch {
	case a >= 100 || a == float64(int64(a)):
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}
