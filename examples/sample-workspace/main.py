"""A tiny inventory tool: the sample project of agentls' quick start.

Try it: in insert mode at the end of a function body, pause, and a grey
suggestion appears; <Tab> accepts it. :AgentChat asks the agent about the
code, and it can edit these files once you approve.
"""

from inventory import Inventory, Item


def load_demo() -> Inventory:
    inventory = Inventory()
    inventory.add(Item("apple", price=0.5, quantity=12))
    inventory.add(Item("pear", price=0.75, quantity=4))
    inventory.add(Item("plum", price=0.3, quantity=0))
    return inventory


def cheapest(inventory: Inventory) -> Item | None:
    """The cheapest item in stock, or None."""
    in_stock = [item for item in inventory.items() if item.quantity > 0]


def main() -> None:
    inventory = load_demo()
    print(f"{len(inventory)} items, worth {inventory.total_value():.2f}")
    print("cheapest in stock:", cheapest(inventory))


if __name__ == "__main__":
    main()
