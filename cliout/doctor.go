package cliout

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/herdbridge/herdbridge/gateway"
)

// Doctor prints doctor's checks, one line each with its fix, or as JSON.
func Doctor(w io.Writer, res gateway.DoctorResult, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(res)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, ch := range res.Checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", ch.Status, ch.Name, ch.Detail)
		if ch.Fix != "" && ch.Status != gateway.CheckOK {
			fmt.Fprintf(tw, "\t\tfix: %s\n", ch.Fix)
		}
	}
	return tw.Flush()
}
