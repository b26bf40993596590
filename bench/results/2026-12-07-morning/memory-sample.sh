#!/bin/bash
# samples the bench server's memory every 2 s: RSS, anon, heap total/used, external, arraybuffers
out=$1; : > $out
while true; do
  pid=$(pgrep -f "bin/school-data.js serve --json" | head -1)
  if [ -n "$pid" ]; then
    port=$(tr '\0' '\n' < /proc/$pid/environ | grep ^SCHOOL_DATA_CABINET_PORT= | cut -d= -f2)
    rss=$(grep VmRSS /proc/$pid/status | awk '{print int($2/1024)}')
    anon=$(grep -E "^Anonymous:" /proc/$pid/smaps_rollup | awk '{print int($2/1024)}')
    m=$(curl -sk https://127.0.0.1:$port/metrics 2>/dev/null)
    ht=$(echo "$m" | awk '/^nodejs_heap_size_total_bytes/ {print int($2/1048576)}')
    hu=$(echo "$m" | awk '/^nodejs_heap_size_used_bytes/ {print int($2/1048576)}')
    ex=$(echo "$m" | awk '/^nodejs_external_memory_bytes/ {print int($2/1048576)}')
    old=$(echo "$m" | awk '/^nodejs_heap_space_size_total_bytes\{space="old"\}/ {print int($2/1048576)}')
    new=$(echo "$m" | awk '/^nodejs_heap_space_size_total_bytes\{space="new"\}/ {print int($2/1048576)}')
    echo "$(date +%T) rss=$rss anon=$anon heapTotal=$ht used=$hu old=$old new=$new external=$ex" >> $out
  fi
  sleep 2
done
