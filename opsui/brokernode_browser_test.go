package opsui_test

import (
	"net/url"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/herdbridge/herdbridge/bridge/broker/brokertest"
	"github.com/herdbridge/herdbridge/gateway/gatewaytest"
)

// TestPageNamesTheBrokerNode: on a broker, the page's header names the
// node the gateway is connected to and its cluster; on the embedded
// transport (TestPageInBrowser) it shows nothing of a broker.
func TestPageNamesTheBrokerNode(t *testing.T) {
	exe := chromium(t)
	live := brokertest.URL(t)
	u, err := url.Parse(live)
	if err != nil {
		t.Fatal(err)
	}
	g := gatewaytest.StartHost(t, gatewaytest.UniqueHost("uinode"), live)
	ctx := tab(t, startBrowser(t, exe))
	do(t, ctx, "log in",
		chromedp.Navigate(loginLink(t, g)),
		chromedp.WaitVisible(chromedp.CSS(`body[data-ready="1"]`)),
	)
	text := value(t, ctx, "the broker in the header", chromedp.Evaluate[string](`document.getElementById("broker").hidden ? "" : document.getElementById("broker").textContent`))
	if want := "broker " + u.Host + " · cluster "; len(text) <= len(want) || text[:len(want)] != want {
		t.Fatalf("header says %q, want %q and the cluster name", text, want)
	}
}
