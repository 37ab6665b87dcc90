package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
	"github.com/herdbridge/herdbridge/keys"
)

// TestPairCommand: `herdbridge pair --json` on A prints the code and its
// expiry as its first line and exits 0 once `herdbridge pair CODE` on B
// paired; both trust files then hold the other's key; nothing was copied.
func TestPairCommand(t *testing.T) {
	url := brokerURL(t)
	pairViaCLI(t, gatewaytest.UniqueHost("cli-pa"), gatewaytest.UniqueHost("cli-pb"), url, url)
}

// TestPairCodeOutOfArgv: the joiner takes the code from stdin
// (`pair -`) and from $HERDBRIDGE_PAIR_CODE, so no code is in its
// command line; both pair.
func TestPairCodeOutOfArgv(t *testing.T) {
	url := brokerURL(t)
	for _, how := range []string{"stdin", "env"} {
		t.Run(how, func(t *testing.T) {
			pairJoining(t, gatewaytest.UniqueHost("cli-pa"), gatewaytest.UniqueHost("cli-pb"), url, url, how)
		})
	}
}

// TestJoinCode: where `pair` finds a joiner's code — "-" reads a line of
// stdin, a code argument is taken with a warning that ps shows it, and
// without an argument $HERDBRIDGE_PAIR_CODE, else nothing (the call
// offers a code).
func TestJoinCode(t *testing.T) {
	var errs bytes.Buffer
	if code, join, err := joinCode([]string{"-"}, strings.NewReader(" k7qm-4xj9 \nrest"), &errs); err != nil || !join || code != "k7qm-4xj9" || errs.Len() != 0 {
		t.Fatalf("pair -: %q %v %v, stderr %q", code, join, err, errs.String())
	}
	if code, join, err := joinCode([]string{"-"}, strings.NewReader("K7QM-4XJ9"), &errs); err != nil || !join || code != "K7QM-4XJ9" {
		t.Fatalf("pair - without a newline: %q %v %v", code, join, err)
	}
	if _, _, err := joinCode([]string{"-"}, strings.NewReader(""), &errs); err == nil {
		t.Fatal("pair - with empty stdin: no error")
	}
	if code, join, err := joinCode([]string{"K7QM-4XJ9"}, nil, &errs); err != nil || !join || code != "K7QM-4XJ9" || !strings.Contains(errs.String(), "visible in ps") {
		t.Fatalf("pair CODE: %q %v %v, stderr %q", code, join, err, errs.String())
	}
	t.Setenv(PairCodeEnv, "K7QM-4XJ9")
	if code, join, err := joinCode(nil, nil, io.Discard); err != nil || !join || code != "K7QM-4XJ9" {
		t.Fatalf("$%s: %q %v %v", PairCodeEnv, code, join, err)
	}
	t.Setenv(PairCodeEnv, "")
	if _, join, err := joinCode(nil, nil, io.Discard); err != nil || join {
		t.Fatalf("no code anywhere: join %v %v", join, err)
	}
}

// TestPairLeastPrivilegeUsers: pairing works with the broker user
// `herdbridge broker-user` makes, as initiator and as joiner (its pairing
// permissions do not depend on the host; one user keeps the test to one
// slow recipe run).
func TestPairLeastPrivilegeUsers(t *testing.T) {
	base := brokerURL(t)
	needBrokerNode(t)
	hostA, hostB := gatewaytest.UniqueHost("lpa"), gatewaytest.UniqueHost("lpb")
	user := "hbtest-" + hostA
	u := amqpURLAs(t, base, user, runBrokerUserRecipe(t, hostA, user, randomHex(16)))
	pairViaCLI(t, hostA, hostB, u, u)
}

// pairViaCLI runs `pair --json` for hostA on urlA and `pair CODE` for
// hostB on urlB, in-process, and checks both trust files.
func pairViaCLI(t *testing.T, hostA, hostB, urlA, urlB string) {
	t.Helper()
	pairJoining(t, hostA, hostB, urlA, urlB, "argv")
}

// pairJoining is pairViaCLI with the joiner's code given as how says:
// "argv" (pair CODE), "stdin" (pair -) or "env" ($HERDBRIDGE_PAIR_CODE).
func pairJoining(t *testing.T, hostA, hostB, urlA, urlB, how string) {
	t.Helper()
	url := urlA
	dirA, dirB := t.TempDir(), t.TempDir()
	pr, pw := io.Pipe()
	var errA bytes.Buffer
	doneA := make(chan error, 1)
	go func() {
		err := run(context.Background(), []string{"pair", "--json", "--state-dir", dirA, "--host-id", hostA, "--broker", url}, nil, pw, &errA)
		pw.CloseWithError(io.EOF)
		doneA <- err
	}()
	lines := bufio.NewScanner(pr)
	if !lines.Scan() {
		t.Fatalf("pair printed nothing: %v\n%s", <-doneA, errA.String())
	}
	var first struct{ Code, Expires string }
	if err := json.Unmarshal(lines.Bytes(), &first); err != nil || first.Code == "" {
		t.Fatalf("first line %q: %v", lines.Text(), err)
	}
	exp, err := time.Parse(time.RFC3339, first.Expires)
	if err != nil || !exp.After(time.Now()) {
		t.Fatalf("expires %q: %v", first.Expires, err)
	}

	var outB, errB bytes.Buffer
	args, stdin := []string{"pair", strings.ToLower(first.Code)}, io.Reader(nil)
	switch how {
	case "stdin":
		args, stdin = []string{"pair", "-"}, strings.NewReader(first.Code+"\n")
	case "env":
		args = []string{"pair"}
		t.Setenv(PairCodeEnv, first.Code) // A is past reading its environment: it printed its code
	}
	if err := run(context.Background(), append(args, "--state-dir", dirB, "--host-id", hostB, "--broker", urlB), stdin, &outB, &errB); err != nil {
		t.Fatalf("pair CODE: %v\n%s", err, errB.String())
	}
	if !strings.HasPrefix(outB.String(), "paired with "+hostA+" (SHA256:") {
		t.Errorf("joiner printed %q", outB.String())
	}
	if !lines.Scan() {
		t.Fatalf("initiator printed no second line: %v", lines.Err())
	}
	var second struct {
		Paired, Fingerprint string
		Failures            int
	}
	if err := json.Unmarshal(lines.Bytes(), &second); err != nil || second.Paired != hostB {
		t.Fatalf("second line %q: %v", lines.Text(), err)
	}
	io.Copy(io.Discard, pr)
	if err := <-doneA; err != nil {
		t.Fatalf("pair on A: %v\n%s", err, errA.String())
	}
	for _, c := range []struct{ dir, peer, peerDir string }{{dirA, hostB, dirB}, {dirB, hostA, dirA}} {
		k, err := keys.Load(filepath.Join(c.peerDir, keys.KeyFile))
		if err != nil {
			t.Fatal(err)
		}
		m, err := keys.ReadTrust(filepath.Join(c.dir, keys.TrustFile))
		if err != nil || len(m[c.peer]) != 1 || !m[c.peer][0].Equal(k.Public()) {
			t.Fatalf("trust file of %s: %v %v, want %s's key", c.dir, m, err, c.peer)
		}
	}
	if second.Fingerprint == "" || second.Failures != 0 {
		t.Errorf("second line %+v", second)
	}
}

func TestPairCommandErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"pair", "--broker", ""}, "pass --broker"},
		{[]string{"pair", "NOT-A-CODE!", "--broker", "amqp://x"}, "not a pairing code"},
		{[]string{"pair", "ABCD-EFGH", "extra"}, "at most one code"},
		{[]string{"pair", "--broker", "http://x"}, "amqp:// or amqps://"},
	} {
		var out, errb bytes.Buffer
		err := run(context.Background(), append(tc.args, "--state-dir", t.TempDir()), nil, &out, &errb)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.args, err, tc.want)
		}
	}
}
