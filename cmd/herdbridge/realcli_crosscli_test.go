package main

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
	"github.com/herdbridge/herdbridge/internal/fakemodel"
)

// TestPiPrimaryGeminiWorker: two different real CLIs on one gateway, each
// configured only by `herdbridge setup`: a Gemini CLI worker (its identity
// from HERDBRIDGE_NAME/HERDBRIDGE_ROLE in its environment, as a spawned one
// gets) long-polls; a pi primary briefs it with wait_s; the worker's model
// reads the brief and replies; the primary's model sees replied with the
// worker's words.
func TestPiPrimaryGeminiWorker(t *testing.T) {
	bin := buildBinary(t)
	state := gatewaytest.TempDir(t)
	gp := startGatewayProcArgs(t, bin, state, "crosshost")
	gemDir, gemProj, gemHome := geminiSetup(t, bin, state)
	piDir, piProj, piHome := piSetup(t, bin, state)

	var wg sync.WaitGroup
	var worker *fakemodel.Gemini
	var workerErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		worker, workerErr = runGemini(t, gemDir, gemProj, gemHome, []string{"HERDBRIDGE_NAME=gemw", "HERDBRIDGE_ROLE=worker"}, answerWhenBriefed)
	}()
	watch := procConn(t, gp, "watch", "primary")
	gatewaytest.Eventually(t, 90*time.Second, "the Gemini worker registers", func() bool {
		return strings.Contains(watch.Call("bridge_roster", map[string]any{"query": "gemw"}).Text, "gemw@") // a listing: the summary shows watch its own circle
	})
	primary, err := piRun{cliDir: piDir, proj: piProj, home: piHome, script: fakemodel.Sequence("done",
		fakemodel.ToolCall{Name: piTool("bridge_send"), Args: map[string]any{"target": "gemw", "message": "brief one: say hi", "wait_s": 40}},
	)}.run(t)
	wg.Wait()
	if workerErr != nil || err != nil {
		t.Fatalf("gemini worker: %v; pi primary: %v", workerErr, err)
	}
	for _, s := range worker.LastResults() {
		t.Logf("the Gemini worker's model saw for %s:\n%s", s.Tool, s.Content)
		if strings.Contains(s.Content, "brief one") {
			logPayload(t, "gemini", "drained", s.Content)
		}
	}
	seen := primary.LastResults()
	for _, s := range seen {
		t.Logf("the pi primary's model saw for %s:\n%s", s.Tool, s.Content)
	}
	if len(seen) == 1 {
		logPayload(t, "pi", "replied", seen[0].Content)
	}
	if len(seen) != 1 || !strings.Contains(seen[0].Content, "status: replied") || !strings.Contains(seen[0].Content, "hi from gemini") {
		t.Errorf("the primary saw %+v, want replied with the worker's words", seen)
	}
}

// answerWhenBriefed is a worker's script: poll (up to 4 times) until a
// result carries "brief one", then reply to lead, then stop.
func answerWhenBriefed(t fakemodel.Turn) fakemodel.Step {
	n := len(t.Results)
	switch {
	case n > 0 && t.Results[n-1].Tool == geminiTool("bridge_send"):
		return fakemodel.Step{Text: "replied"}
	case n > 0 && strings.Contains(t.Results[n-1].Content, "brief one"):
		return fakemodel.Step{ToolCalls: []fakemodel.ToolCall{{Name: geminiTool("bridge_send"), Args: map[string]any{"target": "lead", "message": "hi from gemini"}}}}
	case n >= 4:
		return fakemodel.Step{Text: "no brief came"}
	}
	return fakemodel.Step{ToolCalls: []fakemodel.ToolCall{{Name: geminiTool("bridge_poll"), Args: map[string]any{"wait_s": 30}}}}
}
