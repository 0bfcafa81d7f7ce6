package main

// named is a peer or a load: something -peers or -loads selects by name.
type named interface{ key() string }

// names lists the names of xs in order.
func names[T named](xs []T) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = x.key()
	}
	return out
}

// byName is the element of xs called name; a name not in xs is a bug
// (options.check validates every name first).
func byName[T named](xs []T, name string) T {
	for _, x := range xs {
		if x.key() == name {
			return x
		}
	}
	panic("benchpeers: unknown name " + name)
}
