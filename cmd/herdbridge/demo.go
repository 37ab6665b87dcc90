package main

import (
	"context"
	"io"
)

func cmdDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error { return nil }
