package gateway

import "strings"

// argvCheck warns of a password on a command line — the gateway's (from
// its report) or doctor's own: every local user reads another's argv in
// ps and /proc/PID/cmdline.
func (d *doctor) argvCheck(rep *DoctorReport) {
	var found []string
	if rep != nil && rep.ArgvSecret != "" {
		found = append(found, "the gateway's command line carries a password: "+rep.ArgvSecret)
	}
	if s := ArgvPassword(d.opts.Argv); s != "" {
		found = append(found, "this doctor's command line carries a password: "+s)
	}
	if len(found) == 0 {
		if rep != nil {
			d.add("argv", CheckOK, "no password on the gateway's command line", "")
		}
		return
	}
	d.add("argv", CheckWarn, strings.Join(found, "; ")+" — every local user can read it (ps, /proc/PID/cmdline)",
		"write the password to a file, chmod 600 it, and give --broker amqp[s]://USER@host/ with --broker-password-file FILE "+
			"(or $"+BrokerPasswordFileEnv+", or brokerPassword in a 0600 config.json); for the systemd unit, `herdbridge service install --user -- --broker URL` "+
			"puts the URL in a 0600 EnvironmentFile")
}
