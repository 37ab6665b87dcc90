package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/herdbridge/herdbridge/gateway"
)

// brokerUserCommand prints the rabbitmqctl recipe that creates this host's
// broker user with least privilege.
func brokerUserCommand(stdout io.Writer) *cobra.Command {
	c := &cobra.Command{
		Use:   "broker-user --host-id ID [--user NAME] [--vhost /]",
		Short: "Print a rabbitmqctl recipe: this host's broker user, least privilege",
		Long: `Print a shell recipe (rabbitmqctl) that creates this host's RabbitMQ user with the least
privilege its gateway needs: it may read and write only its own queues and publish only
its own presence. Run the recipe where rabbitmqctl reaches the broker node.`,
		Example: `  herdbridge broker-user --host-id h1 > h1-user.sh && sudo sh h1-user.sh`,
		Args:    noArgs,
	}
	fs := c.Flags()
	host := fs.String("host-id", "", "host id of the gateway the user is for (required)")
	user := fs.String("user", "", "broker user name (default herdbridge-HOST)")
	vhost := fs.String("vhost", "/", "broker virtual host")
	c.RunE = func(*cobra.Command, []string) error {
		recipe, err := gateway.BrokerUserRecipe(*host, *user, *vhost)
		if err != nil {
			return err
		}
		_, err = io.WriteString(stdout, recipe)
		return err
	}
	return c
}
