// Package topology starts the scaled-out shapes of Seckill's services on
// loopback, for tests and benchmarks: a Redis Cluster, a Redis Sentinel
// set and a RabbitMQ cluster, from the installed redis-server and
// rabbitmq-server, on free ports, in directories of their own. Only
// processes started here are ever stopped or killed, by pid.
package topology

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill/seckill/internal/wait"
)

// RedisNode is one redis-server process.
type RedisNode struct {
	Port int
	cmd  *exec.Cmd
	dir  string
	args []string
	done chan struct{} // closed when the process has exited
}

// Addr is the node's host:port.
func (n *RedisNode) Addr() string { return "127.0.0.1:" + strconv.Itoa(n.Port) }

// Kill stops the node with SIGKILL (a crash) and waits for it.
func (n *RedisNode) Kill() {
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	<-n.done
}

// Alive reports whether the node's process still runs.
func (n *RedisNode) Alive() bool {
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

// startRedis starts redis-server on a free port with the given
// directives. A port found free may be taken before the server binds it
// (by another test's connection: the ports are ephemeral ones), so a
// server that does not come up is tried again on other ports.
func startRedis(dir string, directives ...string) (*RedisNode, error) {
	var last error
	for range 3 {
		ports, err := freePorts(1)
		if err != nil {
			return nil, err
		}
		n, err := startRedisOn(dir, ports[0], directives...)
		if err == nil {
			return n, nil
		}
		last = err
	}
	return nil, last
}

// StartRedis starts one redis-server keeping its data in dir (appendonly,
// as production: a Kill and Restart bring it back with what it
// acknowledged), with the given directives on top.
func StartRedis(dir string, directives ...string) (*RedisNode, error) {
	return startRedis(dir, directives...)
}

// startRedisOn starts redis-server on port with the given directives.
func startRedisOn(dir string, port int, directives ...string) (*RedisNode, error) {
	ndir := filepath.Join(dir, strconv.Itoa(port))
	if err := os.MkdirAll(ndir, 0o755); err != nil {
		return nil, err
	}
	conf := []string{"port " + strconv.Itoa(port), "bind 127.0.0.1", "dir " + ndir,
		"logfile " + filepath.Join(ndir, "redis.log"), "protected-mode no"}
	sentinel := strings.Contains(strings.Join(directives, "\n"), "sentinel monitor")
	if !sentinel {
		// As production would (configs/redis.conf): a node restarted after
		// a crash comes back with its data, not empty.
		conf = append(conf, `save ""`, "appendonly yes", "appendfsync everysec")
	}
	conf = append(conf, directives...)
	path := filepath.Join(ndir, "redis.conf")
	if err := os.WriteFile(path, []byte(strings.Join(conf, "\n")+"\n"), 0o644); err != nil {
		return nil, err
	}
	args := []string{path}
	if sentinel {
		args = append(args, "--sentinel")
	}
	n := &RedisNode{Port: port, dir: ndir, args: args}
	if err := n.start(); err != nil {
		return nil, err
	}
	return n, nil
}

// start runs the node's redis-server (again, after a Kill: with the
// configuration it had, which Redis may have rewritten).
func (n *RedisNode) start() error {
	n.cmd = exec.Command("redis-server", n.args...)
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := n.cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server on %d: %w (is redis-server installed? scripts/services.sh installs it)", n.Port, err)
	}
	done := make(chan struct{})
	n.done = done
	go func(cmd *exec.Cmd) {
		_ = cmd.Wait()
		close(done)
	}(n.cmd)
	err := wait.NoError(context.Background(), 10*time.Second, 50*time.Millisecond, func() error {
		c := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1})
		defer c.Close()
		return c.Ping(context.Background()).Err()
	})
	if err != nil {
		n.Kill()
		log, _ := os.ReadFile(filepath.Join(n.dir, "redis.log"))
		if len(log) > 600 {
			log = log[len(log)-600:]
		}
		return fmt.Errorf("redis-server on %d did not answer: %w; its log ends:\n%s", n.Port, err, log)
	}
	return nil
}

// Pause stops the node's process (SIGSTOP) without killing it: a node
// that falls behind, as a replica does on a loaded machine.
func (n *RedisNode) Pause() { _ = n.cmd.Process.Signal(syscall.SIGSTOP) }

// DropReplicas closes the node's connections to its replicas (they would
// reconnect at once, unless paused).
func (n *RedisNode) DropReplicas() error {
	c := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1})
	defer c.Close()
	return c.Do(context.Background(), "CLIENT", "KILL", "TYPE", "replica").Err()
}

// Resume lets a paused node run again.
func (n *RedisNode) Resume() { _ = n.cmd.Process.Signal(syscall.SIGCONT) }

// Restart starts a killed node again, as a crashed server comes back: a
// Sentinel or the cluster makes it a replica of the master that took over.
func (n *RedisNode) Restart() error {
	if n.Alive() {
		return nil
	}
	return n.start()
}

// freePorts returns n loopback ports that are free, as is each one plus
// 10000 (a cluster node's bus port).
func freePorts(n int) ([]int, error) {
	var out []int
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for tries := 0; len(out) < n && tries < 200; tries++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		p := l.Addr().(*net.TCPAddr).Port
		if p+10000 > 65535 {
			l.Close()
			continue
		}
		bus, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+10000))
		if err != nil {
			l.Close()
			continue
		}
		held = append(held, l, bus)
		out = append(out, p)
	}
	if len(out) < n {
		return nil, errors.New("topology: no free ports")
	}
	return out, nil
}

// RedisCluster is a Redis Cluster of masters with one replica each.
type RedisCluster struct {
	Nodes []*RedisNode
	dir   string
}

// Addrs lists every node, the form of SECKILL_REDIS_ADDR for a cluster.
func (c *RedisCluster) Addrs() string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr()
	}
	return strings.Join(addrs, ",")
}

// Node returns the node listening on addr.
func (c *RedisCluster) Node(addr string) *RedisNode {
	for _, n := range c.Nodes {
		if n.Addr() == addr {
			return n
		}
	}
	return nil
}

// Stop kills every node and removes their files.
func (c *RedisCluster) Stop() {
	for _, n := range c.Nodes {
		n.Kill()
	}
	os.RemoveAll(c.dir)
}

// StartRedisCluster starts masters × (1 + 1 replica) redis-server nodes in
// cluster mode and joins them, and returns once the cluster is ok and
// every replica is in sync. A node missing from the cluster for a second
// is failed over.
func StartRedisCluster(masters int) (*RedisCluster, error) {
	dir, err := os.MkdirTemp("", "seckill-redis-cluster")
	if err != nil {
		return nil, err
	}
	c := &RedisCluster{dir: dir}
	for range 2 * masters {
		n, err := startRedis(dir, "cluster-enabled yes", "cluster-config-file nodes.conf",
			"cluster-node-timeout 1000", "cluster-replica-validity-factor 0", "repl-diskless-sync yes",
			"repl-diskless-sync-delay 0")
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.Nodes = append(c.Nodes, n)
	}
	args := append([]string{"--cluster", "create"}, strings.Split(c.Addrs(), ",")...)
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		c.Stop()
		return nil, fmt.Errorf("redis-cli --cluster create: %v\n%s", err, out)
	}
	if err := c.WaitHealthy(30 * time.Second); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// WaitHealthy waits until every live node says the cluster is ok, every
// slot is served, and every master's replica is connected and in sync.
func (c *RedisCluster) WaitHealthy(limit time.Duration) error {
	ctx := context.Background()
	return wait.NoError(context.Background(), limit, 50*time.Millisecond, func() error {
		for _, n := range c.Nodes {
			if !n.Alive() {
				continue
			}
			cl := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1})
			info, err := cl.ClusterInfo(ctx).Result()
			repl, rerr := cl.Info(ctx, "replication").Result()
			cl.Close()
			if err != nil || rerr != nil {
				return errors.Join(err, rerr)
			}
			if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_slots_ok:16384") {
				return fmt.Errorf("%s: cluster not ok yet", n.Addr())
			}
			if strings.Contains(repl, "role:master") && !strings.Contains(repl, "connected_slaves:1") {
				return fmt.Errorf("%s: replica not connected yet", n.Addr())
			}
			if strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
				return fmt.Errorf("%s: replica link down", n.Addr())
			}
		}
		return nil
	})
}

// ReplicaOf returns the replica of the master at addr.
func (c *RedisCluster) ReplicaOf(addr string) (*RedisNode, error) {
	cl := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer cl.Close()
	role, err := cl.Do(context.Background(), "ROLE").Slice()
	if err != nil {
		return nil, err
	}
	if len(role) == 3 {
		if replicas, ok := role[2].([]any); ok && len(replicas) > 0 {
			if r, ok := replicas[0].([]any); ok && len(r) >= 2 {
				if n := c.Node(fmt.Sprintf("%v:%v", r[0], r[1])); n != nil {
					return n, nil
				}
			}
		}
	}
	return nil, fmt.Errorf("topology: %s has no replica (%v)", addr, role)
}

// MasterOf returns the address of the master that serves key now.
func (c *RedisCluster) MasterOf(key string) (string, error) {
	cl := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(c.Addrs(), ",")})
	defer cl.Close()
	m, err := cl.MasterForKey(context.Background(), key)
	if err != nil {
		return "", err
	}
	return m.Options().Addr, nil
}

// SentinelSet is a Redis master with one replica, watched by three
// sentinels that fail it over within a few seconds of its death.
type SentinelSet struct {
	Name      string
	Nodes     []*RedisNode // the master and the replica, as started
	Sentinels []*RedisNode
	dir       string
}

// SentinelAddrs is the form of SECKILL_REDIS_SENTINELS.
func (s *SentinelSet) SentinelAddrs() string {
	addrs := make([]string, len(s.Sentinels))
	for i, n := range s.Sentinels {
		addrs[i] = n.Addr()
	}
	return strings.Join(addrs, ",")
}

// Master returns the node the sentinels name master now.
func (s *SentinelSet) Master() (*RedisNode, error) {
	for _, sn := range s.Sentinels {
		c := redis.NewSentinelClient(&redis.Options{Addr: sn.Addr(), MaxRetries: -1})
		addr, err := c.GetMasterAddrByName(context.Background(), s.Name).Result()
		c.Close()
		if err == nil && len(addr) == 2 {
			for _, n := range s.Nodes {
				if n.Addr() == addr[0]+":"+addr[1] {
					return n, nil
				}
			}
		}
	}
	return nil, errors.New("topology: no sentinel names a master")
}

// Stop kills every process and removes their files.
func (s *SentinelSet) Stop() {
	for _, n := range append(s.Nodes, s.Sentinels...) {
		n.Kill()
	}
	os.RemoveAll(s.dir)
}

// StartSentinelSet starts a master, its replica and three sentinels and
// returns once the replica is in sync and the sentinels know each other.
func StartSentinelSet() (*SentinelSet, error) {
	dir, err := os.MkdirTemp("", "seckill-redis-sentinel")
	if err != nil {
		return nil, err
	}
	s := &SentinelSet{Name: "seckill", dir: dir}
	fast := []string{"repl-diskless-sync yes", "repl-diskless-sync-delay 0"}
	master, err := startRedis(dir, fast...)
	if err != nil {
		return nil, err
	}
	s.Nodes = append(s.Nodes, master)
	replica, err := startRedis(dir, append(fast, fmt.Sprintf("replicaof 127.0.0.1 %d", master.Port))...)
	if err != nil {
		s.Stop()
		return nil, err
	}
	s.Nodes = append(s.Nodes, replica)
	for range 3 {
		n, err := startRedis(dir,
			fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 2", s.Name, master.Port),
			"sentinel down-after-milliseconds "+s.Name+" 1000",
			"sentinel failover-timeout "+s.Name+" 4000",
			"sentinel parallel-syncs "+s.Name+" 1")
		if err != nil {
			s.Stop()
			return nil, err
		}
		s.Sentinels = append(s.Sentinels, n)
	}
	ctx := context.Background()
	err = wait.NoError(context.Background(), 30*time.Second, 50*time.Millisecond, func() error {
		c := redis.NewClient(&redis.Options{Addr: master.Addr(), MaxRetries: -1})
		repl, err := c.Info(ctx, "replication").Result()
		c.Close()
		if err != nil || !strings.Contains(repl, "connected_slaves:1") || !strings.Contains(repl, "state=online") {
			return fmt.Errorf("replica not in sync: %v", err)
		}
		for _, sn := range s.Sentinels {
			c := redis.NewSentinelClient(&redis.Options{Addr: sn.Addr(), MaxRetries: -1})
			replicas, rerr := c.Replicas(ctx, s.Name).Result()
			others, oerr := c.Sentinels(ctx, s.Name).Result()
			c.Close()
			if rerr != nil || oerr != nil || len(replicas) != 1 || len(others) != 2 {
				return fmt.Errorf("sentinel %s does not know the set yet", sn.Addr())
			}
		}
		return nil
	})
	if err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}
