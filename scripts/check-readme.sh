#!/usr/bin/env bash
# The README must stay a page a newcomer can read (issue 22): at most 180 lines, the detail in
# docs/. Fails when README.md is longer, or when a relative link in README.md or docs/*.md
# names a file that does not exist (links to other sites and to anchors alone are not checked).
set -euo pipefail
cd "$(dirname "$0")/.."

MAX_README_LINES=180
status=0

lines=$(wc -l < README.md)
if (( lines > MAX_README_LINES )); then
    echo "README.md: $lines lines, at most $MAX_README_LINES (move the detail to docs/)" >&2
    status=1
fi

# Prints the target of every Markdown link and image outside fenced code blocks, one a line,
# as "LINE<TAB>TARGET".
link_targets() {
    awk '
        /^[[:space:]]*(```|~~~)/ { fenced = !fenced; next }
        fenced { next }
        {
            line = $0
            while (match(line, /\]\([^)]*\)/)) {
                print NR "\t" substr(line, RSTART + 2, RLENGTH - 3)
                line = substr(line, RSTART + RLENGTH)
            }
        }
    ' "$1"
}

for file in README.md docs/*.md; do
    [[ -e "$file" ]] || continue
    dir=$(dirname "$file")
    while IFS=$'\t' read -r line target; do
        target=${target%% *}          # drop a title: [text](path "title")
        target=${target#<}; target=${target%>}
        case "$target" in
            '' | '#'* | http://* | https://* | mailto:*) continue ;;
        esac
        path=${target%%#*}
        path=${path%%\?*}
        if [[ ! -e "$dir/$path" ]]; then
            echo "$file:$line: link to $target: $dir/$path does not exist" >&2
            status=1
        fi
    done < <(link_targets "$file")
done

if (( status == 0 )); then
    echo "README.md: $lines lines; every relative link in README.md and docs/*.md resolves"
fi
exit "$status"
