package benchreport

// Verdict is a row's outcome.
type Verdict string

const (
	Met         Verdict = "met"
	Missed      Verdict = "missed"
	NotMeasured Verdict = "not measured"
	Context     Verdict = "—" // an Info row
)

// A Row is one evaluated target.
type Row struct {
	Target
	Value, Base float64
	Runs        int
	HasBase     bool
	Ratio       float64 // Value/Base; 0 when there is none
	HasRatio    bool
	Verdict     Verdict
	Why         string // "not measured: ..." for the figure or the baseline
}

// Evaluate reads every target's figure and baseline from in and judges it.
// A figure or baseline that is missing gives a row that says why.
func Evaluate(in *Inputs, targets []Target) []Row {
	rows := make([]Row, 0, len(targets))
	for _, t := range targets {
		rows = append(rows, evaluate(in, t))
	}
	return rows
}

func evaluate(in *Inputs, t Target) Row {
	r := Row{Target: t}
	v, n, err := t.Figure.read(in)
	if err != nil {
		r.Verdict, r.Why = NotMeasured, err.Error()
		return r
	}
	r.Value, r.Runs = v, n
	var baseErr error
	if t.Baseline != nil {
		if b, _, err := t.Baseline.read(in); err != nil {
			baseErr = err
		} else {
			r.Base, r.HasBase = b, true
			if b != 0 {
				r.Ratio, r.HasRatio = v/b, true
			}
		}
	}
	switch {
	case t.Goal.Kind == Info:
		r.Verdict = Context
	case t.Goal.needsBaseline() && baseErr != nil:
		r.Verdict, r.Why = NotMeasured, "baseline "+baseErr.Error()
	case t.Goal.needsRatio() && !r.HasRatio:
		r.Verdict, r.Why = NotMeasured, "baseline measured 0: no ratio"
	case t.Goal.met(r.Value, r.Base, r.Ratio):
		r.Verdict = Met
	default:
		r.Verdict = Missed
	}
	if r.Why == "" && baseErr != nil {
		r.Why = "baseline " + baseErr.Error()
	}
	return r
}
