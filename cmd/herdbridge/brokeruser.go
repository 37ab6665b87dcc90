package main

import (
	"fmt"
	"io"

	"github.com/herdbridge/herdbridge/gateway"
)

// cmdBrokerUser prints the rabbitmqctl recipe that creates this host's
// broker user with least privilege.
func cmdBrokerUser(args []string, stdout, stderr io.Writer) error {
	fs, _ := newFlags("broker-user", stderr)
	host := fs.String("host-id", "", "host id of the gateway the user is for (required)")
	user := fs.String("user", "", "broker user name (default herdbridge-HOST)")
	vhost := fs.String("vhost", "/", "broker virtual host")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("broker-user: unexpected argument %q", fs.Arg(0))
	}
	recipe, err := gateway.BrokerUserRecipe(*host, *user, *vhost)
	if err != nil {
		return err
	}
	_, err = io.WriteString(stdout, recipe)
	return err
}
