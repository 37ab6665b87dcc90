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
	if err := run(context.Background(), []string{"pair", strings.ToLower(first.Code), "--state-dir", dirB, "--host-id", hostB, "--broker", urlB}, nil, &outB, &errB); err != nil {
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
