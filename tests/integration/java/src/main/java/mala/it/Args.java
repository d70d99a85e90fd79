// Minimal "--name value" argument parsing for the test programs (repeatable flags via all()).
package mala.it;

import java.util.ArrayList;
import java.util.List;

final class Args {
  private final List<String[]> pairs = new ArrayList<>();

  Args(String[] args) {
    if (args.length % 2 != 0) usage("every flag needs a value");
    for (int i = 0; i < args.length; i += 2) {
      if (!args[i].startsWith("--")) usage("expected a --flag, got " + args[i]);
      pairs.add(new String[] {args[i], args[i + 1]});
    }
  }

  String get(String name, String fallback) {
    String v = fallback;
    for (String[] p : pairs) {
      if (p[0].equals(name)) v = p[1];
    }
    return v;
  }

  String required(String name) {
    String v = get(name, null);
    if (v == null) usage(name + " is required");
    return v;
  }

  List<String> all(String name) {
    List<String> out = new ArrayList<>();
    for (String[] p : pairs) {
      if (p[0].equals(name)) out.add(p[1]);
    }
    return out;
  }

  static void usage(String msg) {
    System.err.println("usage error: " + msg);
    System.exit(2);
  }
}
