package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// machine describes where a run measured.
type machine struct {
	CPUModel string `json:"cpu_model"` // /proc/cpuinfo "model name"
	CPUs     int    `json:"cpus"`
	CPUMHz   string `json:"cpu_mhz"`    // /proc/cpuinfo "cpu MHz"
	Cache    string `json:"cache_size"` // /proc/cpuinfo "cache size"
	Guest    bool   `json:"guest"`      // the CPU flags include "hypervisor": a virtual machine
	MemTotal string `json:"mem_total"`  // /proc/meminfo
	Kernel   string `json:"kernel"`     // uname -r
	Go       string `json:"go"`
	Commit   string `json:"commit"` // git describe of the tree measured
	HAProxy  string `json:"haproxy"`
	Nginx    string `json:"nginx"`
	// XLB and Baseline are the measured daemons' --version lines.
	XLB      string `json:"xlb,omitempty"`
	Baseline string `json:"baseline,omitempty"`
}

func readMachine() machine {
	m := machine{CPUs: runtime.NumCPU(), Go: runtime.Version()}
	m.CPUModel = procField("/proc/cpuinfo", "model name")
	m.CPUMHz = procField("/proc/cpuinfo", "cpu MHz")
	m.Cache = procField("/proc/cpuinfo", "cache size")
	m.Guest = slices.Contains(strings.Fields(procField("/proc/cpuinfo", "flags")), "hypervisor")
	m.MemTotal = procField("/proc/meminfo", "MemTotal")
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	m.Commit = firstLine("git", "describe", "--always", "--dirty")
	m.HAProxy = firstLine("haproxy", "-v")
	m.Nginx = firstLine("nginx", "-v")
	return m
}

// procField is the value of the first "name: value" line of a /proc file.
func procField(path, name string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == name {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// firstLine is the first line a command prints (stdout or stderr), or "".
func firstLine(name string, args ...string) string {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil && len(out) == 0 {
		return ""
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return line
}

// String is the machine in one sentence.
func (m machine) String() string {
	kind := "host"
	if m.Guest {
		kind = "virtual machine"
	}
	return fmt.Sprintf("%s, %d × %s (%s MHz, %s cache), %s memory, Linux %s, %s; %s; %s",
		kind, m.CPUs, m.CPUModel, m.CPUMHz, m.Cache, m.MemTotal, m.Kernel, m.Go, m.HAProxy, m.Nginx)
}
