package topology

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seckill/seckill/internal/wait"
)

// rabbitBin holds the RabbitMQ scripts; run directly (as root, with the
// rabbitmq user's home for its Erlang cookie) rather than through the
// wrapper in /usr/sbin, which would start them as another user.
const rabbitBin = "/usr/lib/rabbitmq/bin"

// RabbitNode is one RabbitMQ node started for a test.
type RabbitNode struct {
	Name string // rabbit node name, e.g. sk1a2b-1@localhost
	Port int    // AMQP port
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

// URL is the node's AMQP URL.
func (n *RabbitNode) URL() string { return fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/", n.Port) }

// Kill stops the node with SIGKILL: the Erlang VM and everything else of
// the process group the node was started in (its own).
func (n *RabbitNode) Kill() {
	_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
	<-n.done
}

func rabbitEnv(n *RabbitNode, distPort int) []string {
	return append(os.Environ(),
		"HOME=/var/lib/rabbitmq",
		"RABBITMQ_NODENAME="+n.Name,
		"RABBITMQ_NODE_PORT="+strconv.Itoa(n.Port),
		"RABBITMQ_DIST_PORT="+strconv.Itoa(distPort),
		"RABBITMQ_MNESIA_BASE="+filepath.Join(n.dir, "mnesia"),
		"RABBITMQ_LOG_BASE="+filepath.Join(n.dir, "log"),
		"RABBITMQ_PID_FILE="+filepath.Join(n.dir, "pid"),
		"RABBITMQ_CONFIG_FILE="+filepath.Join(n.dir, "rabbitmq"),
		"RABBITMQ_ENABLED_PLUGINS_FILE="+filepath.Join(n.dir, "enabled_plugins"),
	)
}

// ctl runs rabbitmqctl against node.
func ctl(node string, args ...string) error {
	cmd := exec.Command(filepath.Join(rabbitBin, "rabbitmqctl"), append([]string{"-n", node}, args...)...)
	cmd.Env = append(os.Environ(), "HOME=/var/lib/rabbitmq")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("rabbitmqctl -n %s %s: %v\n%s", node, strings.Join(args, " "), err, out)
	}
	return nil
}

// RabbitCluster is a RabbitMQ cluster of nodes on loopback ports.
type RabbitCluster struct {
	Nodes []*RabbitNode
	dir   string
}

// URLs lists the nodes' AMQP URLs, starting at node first, comma-separated
// (the form of SECKILL_AMQP_URL for a cluster).
func (c *RabbitCluster) URLs(first int) string {
	urls := make([]string, len(c.Nodes))
	for i := range c.Nodes {
		urls[i] = c.Nodes[(first+i)%len(c.Nodes)].URL()
	}
	return strings.Join(urls, ",")
}

// Stop kills every node and removes their files.
func (c *RabbitCluster) Stop() {
	for _, n := range c.Nodes {
		n.Kill()
	}
	os.RemoveAll(c.dir)
}

// StartRabbitCluster starts n RabbitMQ nodes (no plugins) and joins them
// into one cluster; it returns once every node runs.
func StartRabbitCluster(n int) (*RabbitCluster, error) {
	if _, err := os.Stat(filepath.Join(rabbitBin, "rabbitmq-server")); err != nil {
		return nil, fmt.Errorf("topology: RabbitMQ is not installed (scripts/services.sh installs it): %w", err)
	}
	dir, err := os.MkdirTemp("", "seckill-rabbit-cluster")
	if err != nil {
		return nil, err
	}
	c := &RabbitCluster{dir: dir}
	ports, err := freePorts(2 * n)
	if err != nil {
		return nil, err
	}
	id := strconv.FormatInt(time.Now().UnixNano()%1_000_000, 36)
	for i := range n {
		node := &RabbitNode{Name: fmt.Sprintf("sk%s-%d@localhost", id, i+1), Port: ports[i],
			dir: filepath.Join(dir, strconv.Itoa(i+1)), done: make(chan struct{})}
		if err := os.MkdirAll(node.dir, 0o755); err != nil {
			return nil, err
		}
		conf := fmt.Sprintf("listeners.tcp.local = 127.0.0.1:%d\nloopback_users = none\n", node.Port)
		if err := os.WriteFile(filepath.Join(node.dir, "rabbitmq.conf"), []byte(conf), 0o644); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(node.dir, "enabled_plugins"), []byte("[].\n"), 0o644); err != nil {
			return nil, err
		}
		node.cmd = exec.Command(filepath.Join(rabbitBin, "rabbitmq-server"))
		node.cmd.Env = rabbitEnv(node, ports[n+i])
		node.cmd.Dir = node.dir
		log, err := os.Create(filepath.Join(node.dir, "server.log"))
		if err != nil {
			return nil, err
		}
		node.cmd.Stdout, node.cmd.Stderr = log, log
		node.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := node.cmd.Start(); err != nil {
			c.Stop()
			return nil, err
		}
		go func() {
			_ = node.cmd.Wait()
			log.Close()
			close(node.done)
		}()
		c.Nodes = append(c.Nodes, node)
	}
	for _, node := range c.Nodes {
		// wait: until the pid file appears and the node has booted.
		if err := ctl(node.Name, "wait", filepath.Join(node.dir, "pid"), "--timeout", "120"); err != nil {
			log, _ := os.ReadFile(filepath.Join(node.dir, "server.log"))
			c.Stop()
			return nil, fmt.Errorf("%w\nnode log:\n%s", err, log)
		}
	}
	for _, node := range c.Nodes[1:] {
		for _, step := range [][]string{{"stop_app"}, {"join_cluster", c.Nodes[0].Name}, {"start_app"}} {
			if err := ctl(node.Name, step...); err != nil {
				c.Stop()
				return nil, err
			}
		}
	}
	for _, node := range c.Nodes {
		err := wait.NoError(context.Background(), 30*time.Second, 50*time.Millisecond, func() error {
			conn, err := amqp.DialConfig(node.URL(), amqp.Config{Dial: amqp.DefaultDial(time.Second)})
			if err != nil {
				return err
			}
			return conn.Close()
		})
		if err != nil {
			c.Stop()
			return nil, fmt.Errorf("topology: RabbitMQ node %s: %w", node.Name, err)
		}
	}
	return c, nil
}
