package main

import (
	"testing"

	"github.com/herdbridge/herdbridge/bridge/broker/brokertest"
)

func brokerURL(t testing.TB) string { return brokertest.URL(t) }
