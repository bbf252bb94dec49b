"""Items and the inventory that holds them."""

from dataclasses import dataclass


@dataclass
class Item:
    name: str
    price: float
    quantity: int = 0

    def value(self) -> float:
        return self.price * self.quantity


class Inventory:
    def __init__(self) -> None:
        self._items: dict[str, Item] = {}

    def add(self, item: Item) -> None:
        self._items[item.name] = item

    def items(self) -> list[Item]:
        return list(self._items.values())

    def total_value(self) -> float:
        return sum(item.value() for item in self._items.values())

    def __len__(self) -> int:
        return len(self._items)
