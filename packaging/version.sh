#!/bin/sh
# Print the package version (deb and rpm) of the source tree, from
# `git describe --tags --always --dirty`:
#
#   v1.2.3                      -> 1.2.3
#   v1.2.3-rc.1                 -> 1.2.3~rc.1        (pre-release sorts before 1.2.3)
#   v1.2.3-4-gabc1234           -> 1.2.3+git4.abc1234 (after 1.2.3, before 1.2.4)
#   abc1234 (no tag)            -> 0.0.0~git20261130.002000.abc1234
#                                  (commit time, UTC: later commits sort later)
#   ... with -dirty             -> the same + ".dirty"
#
# The result contains only [0-9A-Za-z.+~], so it is valid both as a Debian
# upstream version and as an RPM Version (no "-"). Usage:
#   packaging/version.sh                      describe HEAD of the current repository
#   packaging/version.sh DESCRIBE [UNIXTIME]  map a given describe string (tests)
set -eu

if [ $# -ge 1 ]; then
	desc=$1
	ctime=${2:-0}
else
	desc=$(git describe --tags --always --dirty 2>/dev/null) || {
		echo "version.sh: not a git checkout; set PKG_VERSION" >&2
		exit 1
	}
	ctime=$(git log -1 --format=%ct)
fi

dirty=
case $desc in
*-dirty)
	dirty=.dirty
	desc=${desc%-dirty}
	;;
esac

if printf '%s\n' "$desc" | grep -Eq '^[0-9a-f]{4,40}$'; then
	# No tag reachable: a bare abbreviated hash.
	stamp=$(TZ=UTC date -d "@$ctime" +%Y%m%d.%H%M%S)
	version="0.0.0~git$stamp.$desc"
else
	tag=$desc
	suffix=
	# TAG-N-gHASH: N commits after TAG.
	if printf '%s\n' "$desc" | grep -Eq -- '-[0-9]+-g[0-9a-f]+$'; then
		hash=${desc##*-g}
		rest=${desc%-g*}
		n=${rest##*-}
		tag=${rest%-*}
		suffix="+git$n.$hash"
	fi
	tag=${tag#v}
	# Pre-release (1.2.3-rc.1): "~" sorts before the release in dpkg and rpm.
	tag=$(printf '%s\n' "$tag" | sed 's/-/~/')
	version="$tag$suffix"
fi
version="$version$dirty"

if ! printf '%s\n' "$version" | grep -Eq '^[0-9][0-9A-Za-z.+~]*$'; then
	echo "version.sh: cannot map '$desc' to a package version (got '$version'); tag as vX.Y.Z or set PKG_VERSION" >&2
	exit 1
fi
printf '%s\n' "$version"
